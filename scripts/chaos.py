#!/usr/bin/env python3
"""Fault-injection benchmark: real `imposer run` hosts, faults at random with a seed, invariants.

Boots ``--hosts`` hosts of ``--slots`` slots (each behind its own fault
proxy in front of ``imposer local``), keeps jobs of several tenants flowing,
injects ``--faults`` faults drawn with ``--seed`` (kill -9 of hosts and pool
children, SIGTERM and double SIGTERM, a parent frozen past its lease TTL,
hanging/crashing/failing tools, duplicate deliveries, AWS 500s, throttling,
delays and dropped connections, killed and concurrent sweeps, a webhook
receiver that is down), then checks the invariants and prints a table of
faults x violations with every violation explained. Exit status 1 when
anything was violated.

    python scripts/chaos.py --faults 300 --seed 7          # docs/fault-injection.rst
    python scripts/chaos.py --faults 3 --kinds host_sigstop --hosts 2 --slots 2   # one fault kind

The short seeded run in CI is ``tests/chaos/test_chaos.py``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import attrs  # noqa: E402

from tests.fixtures.chaos import FAULT_KINDS, Config, Timing, run  # noqa: E402
from tests.fixtures.chaos.cluster import checkout  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", type=int, default=300)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--tenants", default="acme:1,globex:2,initech:3,umbrella:2",
                        help="name:cap,... (default %(default)s)")
    parser.add_argument("--kinds", default=",".join(FAULT_KINDS),
                        help="fault kinds to draw from, comma-separated (default: all)")
    parser.add_argument("--aws", default="",
                        help="aim AWS faults at these only: sqs, dynamodb, s3 or "
                             "service.Operation, comma-separated (default: anything)")
    parser.add_argument("--aws-seconds", default="1,5",
                        help="length of an AWS fault window, min,max (default %(default)s)")
    parser.add_argument("--every", default="1.5,3.5",
                        help="seconds between faults, min,max (default %(default)s)")
    parser.add_argument("--backlog", type=int, default=None,
                        help="jobs kept outstanding (default 1.5 x slots)")
    parser.add_argument("--lease-ttl", type=float, default=8.0)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=300.0,
                        help="deadline for every job to be final after the faults (s)")
    parser.add_argument("--workdir", default=None, help="keep logs here (default: a temp dir)")
    parser.add_argument("--endpoint", default=None, help="use this running `imposer local`")
    parser.add_argument("--list-faults", action="store_true", help="print every fault injected")
    parser.add_argument("--imposer-rev", default=None,
                        help="run the hosts on this git revision of imposer (checked out with "
                             "git archive into the workdir) instead of this tree")
    args = parser.parse_args(argv)

    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(FAULT_KINDS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
    tenants = tuple((name, int(cap)) for name, cap in
                    (part.split(":") for part in args.tenants.split(",")))
    low, high = (float(x) for x in args.every.split(","))
    aws_low, aws_high = (float(x) for x in args.aws_seconds.split(","))
    config = Config(
        seed=args.seed, faults=args.faults, hosts=args.hosts, slots=args.slots, tenants=tenants,
        fault_every=(low, high), kinds=kinds,
        aws_targets=tuple(t for t in args.aws.split(",") if t), aws_seconds=(aws_low, aws_high),
        backlog=args.backlog or int(1.5 * args.hosts * args.slots),
        settle_seconds=args.settle,
        timing=Timing(heartbeat=args.heartbeat, lease_ttl=args.lease_ttl))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="imposer-chaos-"))
    print(f"workdir {workdir}", flush=True)
    if args.imposer_rev:
        config = attrs.evolve(config, imposer_src=str(checkout(args.imposer_rev, workdir)))
    began = time.monotonic()
    report = run(config, workdir, args.endpoint,
                 progress=lambda text: print(f"  {text}", flush=True))
    print(report.render(faults=args.list_faults))
    print(f"\nwall time {time.monotonic() - began:.0f}s; logs in {workdir}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
