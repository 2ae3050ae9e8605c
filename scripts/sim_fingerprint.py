#!/usr/bin/env python3
"""One hash of the simulator's schedules over a grid of workloads and policies.

Run it in two checkouts: the same hash means a change (a refactor, a shared
part) left every simulated schedule exactly as it was, so no figure the
simulator guards can move; a different hash means some schedule moved, and
``--each`` prints one line per run to find which.

    PYTHONPATH=. python scripts/sim_fingerprint.py [--quick] [--each]

The grid: nine workloads x 1-2 hosts x 4/8 slots x borrowing x fair share (2:1
weights) x AWS latency (with a 20 s long poll) x a view period of 5 s or 1 s:
576 runs, about 15 s. ``--quick`` runs the first two workloads (128 runs).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import sys

from imposer.sim.engine import Policy, simulate
from imposer.sim.workload import synthetic

WORKLOADS = ("noisy=100@0,quiet=5x2@3", "a=40@0,b=40@0*2,c=10@20",
             "heavy=60@0,light=6x3@30/60", "long=20@0*4,short=30@5",
             "noisy=80@0,noisy=5@30!0,quiet=4@10", "arrival=50@0/600,burst=30@120",
             "x=30@0,y=30@0,z=30@0,w=30@0", "big=200@0*0.5,small=5x4@60", "one=40@0")


def policies():
    for hosts, slots, borrow, half, latency, view in itertools.product(
            (1, 2), (4, 8), (False, True), (0.0, 600.0), (0.0, 0.02), (5.0, 1.0)):
        yield Policy(hosts=hosts, slots=slots, borrow=borrow, half_life=half,
                     call_seconds=latency, receive_seconds=2 * latency,
                     poll_seconds=20 if latency else 0, redrive_seconds=view,
                     weights=(("quiet", 2.0),) if half else ())


def fingerprint(workloads, each=None) -> tuple[int, str]:
    """(runs, hex digest) of every schedule of *workloads* under every policy."""
    total, runs = hashlib.sha256(), 0
    for spec in workloads:
        jobs = synthetic(spec)
        for policy in policies():
            s = simulate(jobs, policy)
            blob = repr((s.attempts, s.first_start, s.end, s.status,
                         sorted(s.counts.items()))).encode()
            total.update(blob)
            runs += 1
            if each is not None:
                each(f"{hashlib.sha256(blob).hexdigest()[:12]}  {spec}  {policy!r}")
    return runs, total.hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first two workloads only")
    parser.add_argument("--each", action="store_true", help="one line per run, then the hash")
    args = parser.parse_args(argv)
    runs, digest = fingerprint(WORKLOADS[:2] if args.quick else WORKLOADS,
                               print if args.each else None)
    print(f"{runs} schedules  {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
