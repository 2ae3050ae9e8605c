"""Whether the queue holds anything this host could still take (``--exit-when-idle``).

Messages in flight that are queued jobs of paused tenants (cap 0) do not
count: they wait for an operator, not for a worker.
"""

from __future__ import annotations

from imposer.aws.sqs import JobQueue
from imposer.errors import BackendError
from imposer.state.jobs import JobStore
from imposer.state.tenants import TenantStore


class WorkLeft:
    """Reads the queue's depth and, when some is in flight, the paused tenants' open jobs."""

    def __init__(self, queue: JobQueue, jobs: JobStore, tenants: TenantStore) -> None:
        self.queue, self.jobs, self.tenants = queue, jobs, tenants

    def none(self) -> bool:
        """Nothing visible or delayed, and nothing in flight but paused tenants' jobs; an
        AWS error says there may be work (the worker stays up)."""
        try:
            depth = self.queue.depth()
        except BackendError:
            return False
        return depth["visible"] + depth["delayed"] == 0 and \
            depth["in_flight"] <= self.paused_messages()

    def paused_messages(self) -> int:
        """Queued jobs of paused tenants (cap 0)."""
        paused = {t for t, cap in self.tenants.caps().items() if cap <= 0}
        if not paused:
            return 0
        return sum(1 for r in self.jobs.open_jobs(("queued",)) if r.tenant_id in paused)
