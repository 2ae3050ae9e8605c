"""What the parent sends down a pool child's pipe for one job."""

from __future__ import annotations

import attrs

from imposer.models.request import JobRequest


@attrs.frozen(kw_only=True)
class TaskSpec:
    """One job for a pool child, with the limits and places the parent chose."""

    request: JobRequest
    #: Seconds the tool may run before the child kills its process tree.
    timeout: float
    #: s3:// URI this attempt uploads its plate to (promoted by the parent on commit).
    upload_to: str
    #: Fencing epoch of the attempt, stamped on the uploaded plate.
    epoch: str
    #: Directory the child works in; the parent removes it if the child dies.
    workdir: str
    #: Tag put in the tool's environment, so the parent finds and kills orphans.
    owner: str
