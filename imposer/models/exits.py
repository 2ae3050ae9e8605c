"""Every exit code of the `imposer` command and the tenant client, in one table.

Scripts and systemd read these, so they are a wire format like a message
body: the client shares them with the service through ``models``. README's
table of exit codes is checked against this one by a test.
"""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    """Exit codes; boot failures are distinct so systemd does not restart in a loop."""

    #: Done, nothing wrong.
    OK = 0
    #: The command failed (for example an output that cannot be written).
    FAILED = 1
    #: A bad option, layout or input PDF: fix the call.
    USAGE = 2
    #: Configuration: a bad setting, a missing table or queue, pdfToolbox not found.
    CONFIG = 3
    #: AWS (or the admission Redis) unreachable or refusing: a restart may well fix it.
    BACKEND = 4
    #: A background thread of the worker died; systemd restarts it.
    THREAD_DIED = 5
    #: Admission control refused the job (any reason).
    ADMISSION = 9
    #: The idempotency token is already in flight or completed.
    DUPLICATE_TOKEN = 10
    #: The tenant's rate limit is reached.
    RATE_LIMITED = 11
    #: The tenant's in-flight cap is reached.
    INFLIGHT_CAP = 12
    #: Uploading the artwork or publishing the message failed.
    SUBMIT_FAILED = 13
    #: A webhook request failed verification.
    WEBHOOK_VERIFICATION = 14
