"""Hand a leased job to the pool, or give back a lease it will not run under.

Shared by ``dispatch`` (a received message) and ``refill`` (a parked job
handed a freed slot): both acquire a lease, then launch it here; a lease
whose job cannot start is released at once, so no slot leaks until its TTL.
"""

from __future__ import annotations

import logging

from imposer.clock import Clock
from imposer.errors import AcquireUncertain, BackendError, LeaseLost
from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import JobRequest, JobStatus, Lease, Received, TaskSpec
from imposer.models.urgency import record_fields
from imposer.state.leases import LeaseStore
from imposer.worker.dispatch.contention import ContentionMeter
from imposer.worker.overrun import OverrunPolicy
from imposer.worker.timing import LeaseTiming
from imposer.worker.dispatch.pool import Pool
from imposer.worker.threads.rollup import RollupRecorder
from imposer.worker.running import Running, RunningTable

logger = logging.getLogger(__name__)


class Launcher:
    """Start leased jobs in the pool; count them; unwind leases that will not run."""

    def __init__(self, *, leases: LeaseStore, pool: Pool, running: RunningTable,
                 rollups: RollupRecorder, contention: ContentionMeter, overrun: OverrunPolicy,
                 metrics: Metrics, clock: Clock, timing: LeaseTiming) -> None:
        self.leases, self.pool, self.running = leases, pool, running
        self.rollups, self.contention, self.overrun = rollups, contention, overrun
        self.metrics, self.clock = metrics, clock
        self.timing = timing
        #: Jobs started by this host since it booted.
        self.started = 0

    def acquire_failed(self, request: JobRequest, exc: BackendError,
                       then: str = "it will come back") -> None:
        """An acquire's reply was lost or refused: undo the leases it may have committed."""
        logger.warning("could not take job %s: %s; %s", request.key, exc, then,
                       extra=extra("acquire_error", request.tenant_id, request.job_id))
        for lease in exc.leases if isinstance(exc, AcquireUncertain) else ():
            self.unwind(lease, "its acquire's reply was lost")

    def unwind(self, lease: Lease, why: str) -> None:
        """Release a lease we hold but will not run under, so no slot leaks until its TTL."""
        try:
            self.leases.release(lease, JobStatus.QUEUED, wait_reason=f"not started: {why}")
        except LeaseLost:
            pass  # it never committed, or the sweep took it already
        except BackendError as exc:
            logger.warning("could not give back the lease of %s (%s); the sweep will, when it "
                           "expires", lease.job_id, exc,
                           extra=extra("release_error", lease.tenant_id, lease.job_id))

    def launch(self, request: JobRequest, message: Received, free: list[int], lease: Lease, *,
               received_at: float) -> bool:
        """Hand a leased job to the pool in ``free[0]`` and account its queue wait.

        *received_at* (monotonic) is when its message was received, or its parked
        note taken: the parent's overhead (``dispatch_ms``) counts from then.

        An acquire that took longer than a third of the lease TTL (a stalled
        AWS) renews the lease first, so the sweep never reclaims a job that
        is only starting; if it cannot, the lease is given back and the
        message waits for its next delivery. False when not launched.
        """
        if self.timing.renew_before_launch(lease.expires_at, self.clock.time()):
            try:
                lease = self.leases.renew(lease)
            except (LeaseLost, BackendError) as exc:
                logger.warning("job %s: lease nearly expired by a slow acquire and not renewed "
                               "(%s); not starting it", request.key, exc,
                               extra=extra("acquire_slow", request.tenant_id, request.job_id))
                self.unwind(lease, "its acquire was too slow")
                return False
        slot = free.pop(0)
        wait = max(0.0, lease.acquired_at - (request.submitted_at or message.sent_at))
        self.running.add(Running(slot=slot, request=request, message=message, lease=lease,
                                 started=self.clock.monotonic(), received=received_at))
        self.pool.submit(slot, TaskSpec(
            request=request, timeout=self.overrun.tool_timeout, epoch=lease.epoch,
            upload_to=request.attempt_uri(lease.epoch), workdir=str(self.pool.slot_dir(slot)),
            owner=self.pool.owner(slot)),
            run_for=self.timing.tools_may_run(lease.expires_at - self.clock.time()))
        # (a start after the due time: each such start, a retry's included)
        late_by = None if request.due is None or lease.acquired_at <= request.due \
            else lease.acquired_at - request.due
        self.rollups.job_started(request.tenant_id, wait, lease.acquired_at,
                                 priority=request.priority, late=late_by is not None)
        self.contention.started(request.job_id)
        self.started += 1
        dispatch_ms = 1000 * (self.clock.monotonic() - received_at)
        self.metrics.emit("queue_wait", round(wait, 3), tenant_id=request.tenant_id)
        if late_by is not None:
            self.metrics.emit("started_late", 1, tenant_id=request.tenant_id)
        urgency = record_fields(request.priority, request.due)
        logger.info("started job %s on slot %s after %.1fs in queue%s%s", request.job_id, slot,
                    wait, " (borrowed slot)" if lease.borrowed else "",
                    "" if late_by is None else f", {late_by:.1f}s after its due time",
                    extra=extra("job_started", request.tenant_id, request.job_id, slot=slot,
                                queue_wait=wait, borrowed=lease.borrowed,
                                dispatch_ms=round(dispatch_ms, 2), **urgency,
                                **({} if late_by is None else {"late_by": round(late_by, 3)})))
        return True
