"""Doctor's check that the CloudWatch agent ships the worker log (and so its metrics).

The dashboard, the alarms and the licence rule are all made from the JSON
lines of IMPOSER_LOG_FILE once the agent has put them in the stack's log
group; a host whose agent is not shipping runs jobs nobody can see, and
``HostSilentAlarm`` pages for it. The check reads the file's newest line and
looks for it in this host's stream (the agent names it ``{hostname}``, the
host name, which the bootstrap also makes ``IMPOSER_HOST_ID``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from imposer.cli.doctor.check import FAIL, OK, SKIP, WARN, Check
from imposer.errors import ImposerError
from imposer.settings import Settings

#: A line written this recently may still be on its way: the agent ships every 5 s or so.
FRESH_SECONDS = 60.0
#: Events older than the line's write by more than this are not searched (clock slack).
SLACK_SECONDS = 60.0


def newest_line(path: Path, tail_bytes: int = 65536) -> str:
    """The last non-empty line of *path* (reading only its tail)."""
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - tail_bytes))
        lines = f.read().decode("utf-8", "replace").splitlines()
    return next((line for line in reversed(lines) if line.strip()), "")


def log_shipping(s: Settings, now: Callable[[], float] = time.time) -> Iterator[Check]:
    """The newest line of the log file is in the log group, in this host's stream."""
    from imposer.aws.logs import LogGroup

    name = "log shipping"
    if not s.log_group:
        yield Check(name=name, status=SKIP, detail="not checked (IMPOSER_LOG_GROUP is empty)")
        return
    path = Path(s.log_file)
    if not path.is_file():
        yield Check(name=name, status=FAIL, detail=(
            f"{path} does not exist: imposer-logs.service writes it, the agent ships it"))
        return
    line, written = newest_line(path), path.stat().st_mtime
    if not line:
        yield Check(name=name, status=WARN, detail=(
            f"{path} is empty (just rotated, or nothing written yet): nothing to look for"))
        return
    where = f"log group {s.log_group}, stream {s.host_id}"
    try:
        shipped = LogGroup(s.region, s.log_group).has_line(s.host_id, line,
                                                           written - SLACK_SECONDS)
    except ImposerError as exc:
        yield Check(name=name, status=FAIL, detail=str(exc))
        return
    age = max(0.0, now() - written)
    if shipped:
        yield Check(name=name, status=OK, detail=f"{path}'s newest line is in {where}")
    elif age < FRESH_SECONDS:
        yield Check(name=name, status=WARN, detail=(
            f"{path}'s newest line, written {age:.0f} s ago, is not in {where} yet"))
    else:
        yield Check(name=name, status=FAIL, detail=(
            f"{path}'s newest line, written {age:.0f} s ago, is not in {where}: is "
            "amazon-cloudwatch-agent running with deploy/cloudwatch-agent.json, and is "
            "IMPOSER_HOST_ID this host's name?"))
