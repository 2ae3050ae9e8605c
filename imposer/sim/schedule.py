"""What one simulation returns: every attempt of every job, its fate, and the counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import attrs

from imposer.sim.policy import Policy
from imposer.sim.workload import SimJob


class Attempt(NamedTuple):
    """One attempt of a job on a slot."""

    job: int
    host: int
    slot: int
    start: float
    end: float
    borrowed: bool
    fate: str


@attrs.frozen(kw_only=True)
class Schedule:
    """What happened to every job of the workload under one policy."""

    jobs: tuple[SimJob, ...]
    policy: Policy
    attempts: tuple[Attempt, ...]
    #: Per job (index of ``jobs``): first start, end of the last attempt (None if never).
    first_start: tuple[float | None, ...]
    end: tuple[float | None, ...]
    #: Per job: succeeded, failed, dead, or paused (its tenant's cap is 0).
    status: tuple[str, ...]
    #: Simulated work: receives (empty polls included), messages received, parks, park
    #: windows that ran out, hand-offs, hand-offs owed (the freed slot was the host's
    #: last), deferrals, borrows, retries, and the AWS calls (the receives' included; of
    #: them, the tenants' cap reads).
    counts: Mapping[str, int]
