"""The pool child's loop: receive a task over the pipe, run it, send the Outcome back.

Everything here runs in a pool process. It touches S3 only (through the
task's storage adapter); the queue and the lease state belong to the parent.
"""

from __future__ import annotations

import signal
import sys

from imposer import logs
from imposer.child import task
from imposer.child.fence import Fence
from imposer.settings import Settings


def child_main(conn, settings: Settings, deadline=None) -> None:
    """Run jobs sent over *conn* until told to stop; never raise across the pipe.

    *deadline* is the slot's shared lease deadline (``imposer.child.fence``).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    # SIGTERM unwinds, so the tool wrapper's cleanup kills pdfToolbox's tree.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logs.setup(settings.log_level)  # JSON lines, like the parent's: one log stream to grep
    fence = None
    if deadline is not None:
        fence = Fence(deadline)
        fence.start()
    runner = task.TaskRunner(settings, fence)
    while True:
        try:
            spec = conn.recv()
        except (EOFError, OSError):
            return
        if spec is None:
            return
        conn.send(runner.run(spec))
        if runner.spent:  # after a MemoryError, a fresh process is safer than this one
            return
