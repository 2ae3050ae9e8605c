"""The pool child's loop: receive a task over the pipe, run it, send the Outcome back.

Everything here runs in a pool process. It touches S3 only (through the
task's storage adapter); the queue and the lease state belong to the parent.
"""

from __future__ import annotations

import signal
import sys


def child_main(conn, settings) -> None:
    """Run jobs sent over *conn* until told to stop; never raise across the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    # SIGTERM unwinds, so the tool wrapper's cleanup kills pdfToolbox's tree.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    from imposer.child import task

    runner = task.TaskRunner(settings)
    while True:
        try:
            spec = conn.recv()
        except (EOFError, OSError):
            return
        if spec is None:
            return
        conn.send(runner.run(spec))
