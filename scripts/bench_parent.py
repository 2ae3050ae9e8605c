#!/usr/bin/env python3
"""Measure the parent's memory with 8 idle pool children (target: under 150 MB RSS).

Starts `imposer local`, provisions it, runs `imposer run --slots 8` idle for a
few seconds, and prints the parent's RSS next to the target, plus the
children's (forkserver children share pages with the fork server).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import psutil

TARGET_MB = 150


def main() -> int:
    env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
               AWS_DEFAULT_REGION="us-east-1", IMPOSER_ENGINE="open", IMPOSER_SLOTS="8")
    local = subprocess.Popen([sys.executable, "-m", "imposer", "local", "--port", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    env["AWS_ENDPOINT_URL"] = local.stdout.readline().strip().split("=", 1)[1]
    try:
        subprocess.run([sys.executable, "-m", "imposer", "init"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        with tempfile.TemporaryFile() as log:
            worker = subprocess.Popen([sys.executable, "-m", "imposer", "run"], env=env,
                                      stdout=log, stderr=log)
            time.sleep(8)
            parent = psutil.Process(worker.pid)
            children = parent.children(recursive=True)
            parent_mb = parent.memory_info().rss / 2**20
            kids = [c.memory_info().rss / 2**20 for c in children]
            uss = parent.memory_full_info().uss / 2**20
            worker.terminate()
            worker.wait(30)
    finally:
        local.terminate()
        local.wait(10)
    verdict = "ok" if parent_mb < TARGET_MB else "OVER"
    print(f"parent RSS {parent_mb:6.1f} MB (USS {uss:.1f} MB)   target < {TARGET_MB} MB   "
          f"{verdict}   ratio {parent_mb / TARGET_MB:.2f}")
    print(f"{len(kids)} child processes (8 slots + fork server + resource tracker): "
          f"RSS {sum(kids):.1f} MB total, {max(kids):.1f} MB largest")
    return 0 if parent_mb < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
