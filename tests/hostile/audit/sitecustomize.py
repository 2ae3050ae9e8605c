"""Loaded by every Python process of a hostile-input run (PYTHONPATH points here).

With ``IMPOSER_AUDIT_LOG`` set, it records each file a process opens, as
``<pid> <path>`` lines, through an audit hook (PEP 578). The log is opened
once, before the hook exists, and written with ``os.write``, which raises
no audit event, so the hook never sees itself.
"""

import os
import sys

_LOG = os.environ.get("IMPOSER_AUDIT_LOG")

if _LOG:
    _fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _hook(event, args):
        if event != "open" or not args:
            return
        path = args[0]
        if isinstance(path, int):
            return
        try:
            text = os.fsdecode(path)
        except (TypeError, ValueError):
            return
        os.write(_fd, f"{os.getpid()} {os.path.abspath(text)}\n".encode("utf-8", "replace"))

    sys.addaudithook(_hook)
