"""The parent's gauges, sampled beside the loop: slot utilisation and its split, and share gaps.

Each is a side thread's pass (``Periodic``), so reading the queue's depth or
the share view never holds up settling or dispatch.
"""

from __future__ import annotations

from imposer.aws.sqs import JobQueue
from imposer.clock import Clock
from imposer.metrics import Metrics
from imposer.webhooks.outbox import OutboxSender
from imposer.worker.dispatch.contention import ContentionMeter
from imposer.worker.dispatch.handoff import HandOff
from imposer.worker.dispatch.pool import Pool
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.threads.rollup import RollupRecorder


class Utilisation:
    """Sample this host's slot utilisation, parked backlog, oldest due webhook and the
    stranded/shortage split."""

    def __init__(self, *, host_id: str, pool: Pool, handoff: HandOff, sender: OutboxSender,
                 queue: JobQueue, contention: ContentionMeter, rollups: RollupRecorder,
                 metrics: Metrics, clock: Clock) -> None:
        self.host_id, self.pool, self.handoff = host_id, pool, handoff
        self.sender, self.queue, self.contention, self.rollups = (sender, queue, contention,
                                                                   rollups)
        self.metrics, self.clock = metrics, clock

    def sample(self) -> None:
        """Emit this host's slot utilisation, parked backlog, oldest due webhook and the
        stranded/shortage split."""
        busy, host, slots = self.pool.busy_count(), self.host_id, self.pool.size
        self.metrics.emit("slot_utilisation", 100.0 * busy / slots, host=host)
        self.metrics.emit("backlog", self.handoff.parked_here(), host=host)
        self.metrics.emit("webhook_oldest_pending", round(self.sender.oldest_pending, 3),
                          host=host)
        queued = self.queue.depth()["visible"] if busy >= slots else 0
        stranded, stranded_time, shortage = self.contention.sample(busy, queued)
        self.rollups.contention(stranded, stranded_time, shortage, self.clock.time())


class ShareGaps:
    """Fair share's background pass: re-read the share view, and say each tenant's gap."""

    def __init__(self, shares: SharePolicy, metrics: Metrics) -> None:
        self.shares, self.metrics = shares, metrics

    def refresh(self) -> None:
        """Fair share: re-read who waits and the usage (a background pass), and say each
        active tenant's share gap (``share_gap``: its fraction of recent licence time minus
        its weighted share)."""
        self.shares.refresh()
        for tenant, gap in self.shares.gaps().items():
            self.metrics.emit("share_gap", round(100 * gap, 2), tenant_id=tenant)
