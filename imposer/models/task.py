"""What the parent sends down a pool child's pipe for one job."""

from __future__ import annotations

import attrs

from imposer.models.request import JobRequest


@attrs.frozen(kw_only=True)
class TaskSpec:
    """What the parent sends down the pipe for one job."""

    request: JobRequest
    #: Attempt number, for logs.
    attempt: int = 1
