"""What the simulator replays: one SimJob per job, from records, an export or a generator.

A job record keeps only counts of what happened (attempts, counted failures)
and the run time of its last attempt, so a replayed job runs that long on
every attempt, its uncounted retries (licence unavailable) first, then its
counted failures, then its final attempt.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
from pathlib import Path
from typing import Iterable, Sequence

import attrs

from imposer.errors import ConfigError
from imposer.models import JobRecord, JobStatus
from imposer.models.urgency import DEFAULT_PRIORITY, parse_priority

#: Fates of one attempt: the run ended the job (succeeded, failed), counted as a failure
#: (retry: back after the retry backoff, dead at max attempts) or not (requeue: licence
#: unavailable, back after the deferral).
FATES = ("succeeded", "failed", "retry", "requeue")


@attrs.frozen(kw_only=True)
class SimJob:
    """One job to replay: who sent it, when, how long each attempt runs and how it ends."""

    tenant: str
    #: Seconds (epoch, or from any origin) when the tenant submitted it.
    arrival: float
    #: Seconds each attempt holds a slot.
    run: float
    #: What each attempt ends in (see ``FATES``); after the last, it repeats.
    fates: tuple[str, ...] = ("succeeded",)
    job_id: str = ""
    #: Its priority within its tenant (0 most urgent; ``models.urgency``).
    priority: int = DEFAULT_PRIORITY
    #: When the tenant wants it by, on the arrivals' clock (None: no due time).
    due: float | None = None

    def __attrs_post_init__(self) -> None:
        if not self.fates or set(self.fates) - set(FATES):
            raise ConfigError(f"fates must be some of {', '.join(FATES)}, not {self.fates!r}")
        if self.run < 0 or math.isnan(self.run):
            raise ConfigError(f"run seconds must not be negative ({self.run!r})")


def from_records(records: Iterable[JobRecord], *, now: float | None = None) -> list[SimJob]:
    """Turn job records into jobs to replay, first submitted first.

    A record that never ran (queued) runs for its tenant's median; a running
    one for as long as it has run by *now* (a lower bound).
    """
    rows = []
    for r in records:
        arrival = r.submitted_at if r.submitted_at is not None else r.received_at
        if arrival is None:
            continue
        run = r.run_seconds
        if run is None and r.started_at is not None:
            end = r.finished_at if r.finished_at is not None else now
            run = None if end is None else max(0.0, end - r.started_at)
        rows.append((r, float(arrival), run))
    medians = _medians((r.tenant_id, run) for r, _, run in rows if run is not None)
    jobs = []
    for r, arrival, run in rows:
        if run is None:
            run = medians.get(r.tenant_id, statistics.median(medians.values()) if medians else 0.0)
        jobs.append(SimJob(tenant=r.tenant_id, arrival=arrival, run=float(run),
                           fates=fates_of(r), job_id=r.job_id,
                           priority=DEFAULT_PRIORITY if r.priority is None else r.priority,
                           due=r.due))
    return sorted(jobs, key=lambda j: (j.arrival, j.job_id))


def fates_of(record: JobRecord) -> tuple[str, ...]:
    """Spell out a record's attempts: uncounted retries, counted failures, then the end."""
    failures = max(0, record.failures)
    if record.status is JobStatus.DEAD:
        return ("retry",) * max(1, failures)
    final = "failed" if record.status is JobStatus.FAILED else "succeeded"
    requeues = max(0, record.attempts - failures - 1)
    return ("requeue",) * requeues + ("retry",) * failures + (final,)


def _medians(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    runs: dict[str, list[float]] = {}
    for tenant, run in pairs:
        runs.setdefault(tenant, []).append(run)
    return {t: statistics.median(v) for t, v in runs.items()}


def from_jsonl(path: str | Path) -> list[SimJob]:
    """Read the JSON lines of `imposer jobs --export`."""
    records = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                item.pop("warnings", None)
                records.append(JobRecord.from_item(item))
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path}:{number}: not a job record of `imposer jobs "
                                  f"--export` ({exc})") from None
    return from_records(records)


_PART = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)=(?P<count>\d+)(?:x(?P<tenants>\d+))?"
                   r"(?:@(?P<at>[0-9.]+[smhdw]?))?(?:/(?P<spread>[0-9.]+[smhdw]?))?"
                   r"(?:\*(?P<scale>[0-9.]*[0-9]))?(?:!(?P<priority>\d))?"
                   r"(?:~(?P<due>[0-9.]+[smhdw]?))?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _seconds(text: str | None) -> float:
    if not text:
        return 0.0
    unit = text[-1] if text[-1] in _UNITS else "s"
    return float(text.rstrip("smhdw")) * _UNITS[unit]


def tenant_names(name: str, count: int) -> list[str]:
    """``quiet`` x 2 is quiet-a and quiet-b (quiet-1 ... beyond 26); one tenant keeps its name."""
    if count == 1:
        return [name]
    if count <= 26:
        return [f"{name}-{chr(ord('a') + i)}" for i in range(count)]
    return [f"{name}-{i + 1}" for i in range(count)]


def synthetic(spec: str, *, median: float = 60.0, sigma: float = 0.45, seed: int = 7,
              origin: float = 0.0) -> list[SimJob]:
    """Generate jobs from ``noisy=100@0,quiet=5x2@3``: log-normal run times, seeded.

    Each part is ``NAME=COUNT[xTENANTS][@START][/SPREAD][*SCALE][!PRIORITY][~DUE]``:
    COUNT jobs per tenant arriving at START (seconds, or 30m, 2h, 1d) after *origin*,
    all at once or, with SPREAD, uniformly over that long. Run times are
    ``median * lognormal(0, sigma)``, clipped to 0.3-4 times the median; SCALE
    multiplies a part's run times (``long=40@0*4``: jobs 4x longer). PRIORITY (0-9)
    and DUE (due that long after each job's arrival) are the jobs' urgency; two parts
    of one NAME are one tenant's (``noisy=100@0,noisy=5@30!0``: 5 rush jobs at 30 s).
    """
    rng = random.Random(seed)
    jobs: list[SimJob] = []
    sent: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        m = _PART.match(part)
        if not m:
            raise ConfigError(f"not a workload part: {part!r} (want NAME=COUNT[xTENANTS]"
                              "[@START][/SPREAD][*SCALE][!PRIORITY][~DUE], e.g. noisy=100@0 "
                              "or quiet=5x2@3)")
        start, spread = _seconds(m["at"]), _seconds(m["spread"])
        scale = float(m["scale"] or 1)
        priority = parse_priority(int(m["priority"])) if m["priority"] else DEFAULT_PRIORITY
        for tenant in tenant_names(m["name"], int(m["tenants"] or 1)):
            for _ in range(int(m["count"])):
                at = start + (rng.random() * spread if spread else 0.0)
                run = rng.lognormvariate(0, sigma) * median
                run = round(min(max(run, 0.3 * median), 4 * median) * scale, 2)
                sent[tenant] = sent.get(tenant, 0) + 1
                jobs.append(SimJob(tenant=tenant, arrival=origin + at, run=run,
                                   job_id=f"{tenant}-{sent[tenant]}", priority=priority,
                                   due=None if m["due"] is None
                                   else origin + at + _seconds(m["due"])))
    if not jobs:
        raise ConfigError(f"the workload {spec!r} has no jobs")
    return jobs


def shift(jobs: Sequence[SimJob], origin: float) -> list[SimJob]:
    """Move every arrival by *origin* seconds (to replay a run relative to its start)."""
    return [attrs.evolve(j, arrival=j.arrival + origin) for j in jobs]
