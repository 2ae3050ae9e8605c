"""The one policy for a job that runs too long.

The pool child kills the tool at the job timeout; the parent allows slack
beyond that (two heartbeats and a little more) for the child to report. Past
the slack the heartbeat stops renewing the job's lease and the parent kills
the slot, so a wedged child loses its job exactly like a crashed host would.
"""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class OverrunPolicy:
    """How long a job may run, as the child, the heartbeat and the reaper see it."""

    #: Seconds the tool may run before the child kills its process tree.
    job_timeout: float
    #: Seconds between heartbeats.
    heartbeat: float
    #: Extra seconds beyond the slack, for the child to unwind and report.
    margin: float = 5.0

    @property
    def tool_timeout(self) -> float:
        """What the child enforces on the tool."""
        return self.job_timeout

    @property
    def limit(self) -> float:
        """Seconds after dispatch when the parent gives a job up."""
        return self.job_timeout + 2 * self.heartbeat + self.margin

    def overran(self, started: float, now: float) -> bool:
        """Say whether a job dispatched at monotonic *started* ran past the limit at *now*."""
        return now - started > self.limit
