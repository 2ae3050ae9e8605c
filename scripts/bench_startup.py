#!/usr/bin/env python3
"""Start-up benchmark: Python import time of operator commands (target under 0.3 s).

Runs each command with ``python -X importtime`` several times and sums the
top-level imports (the interpreter's own start-up is left out, as importtime
does), printing the median beside the target. ``imposer leases`` is pointed
at a closed port, so it imports all it needs and fails fast.

    python scripts/bench_startup.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

TARGET = 0.3
COMMANDS = (["leases", "--help"], ["leases"], ["why", "--help"], ["--help"],
            ["layouts"])


def import_seconds(args: list[str]) -> float:
    env = dict(os.environ, AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_ACCESS_KEY_ID="x",
               AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1")
    err = subprocess.run([sys.executable, "-X", "importtime", "-m", "imposer", *args], env=env,
                         capture_output=True, text=True).stderr
    total = 0
    for line in err.splitlines():
        if not line.startswith("import time:"):
            continue
        _, cumulative, name = line.split("|", 2)
        if cumulative.strip().isdigit() and len(name) - len(name.lstrip(" ")) == 1:
            total += int(cumulative)
    return total / 1e6


def main() -> int:
    worst = 0.0
    for args in COMMANDS:
        seconds = statistics.median(import_seconds(args) for _ in range(5))
        pikepdf = "pikepdf" in subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "imposer", *args],
            capture_output=True, text=True, env=dict(os.environ,
                                                     AWS_ENDPOINT_URL="http://127.0.0.1:9")).stderr
        label = " ".join(["imposer", *args])
        print(f"{label:28} imports {seconds:5.3f} s  (target {TARGET} s, ratio "
              f"{seconds / TARGET:.2f}){'  [pikepdf]' if pikepdf else ''}")
        if args[0] != "layouts":
            worst = max(worst, seconds)
    print(f"worst operator command: {worst:.3f} s: {'met' if worst < TARGET else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
