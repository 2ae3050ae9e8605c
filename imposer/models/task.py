"""What the parent sends down a pool child's pipe for one job."""

from __future__ import annotations

import attrs

from imposer.models.request import JobRequest


@attrs.frozen(kw_only=True)
class TaskSpec:
    """One job for a pool child, with the limits the parent's policies set."""

    request: JobRequest
    #: Seconds the tool may run before the child kills its process tree.
    timeout: float
