"""The long-running parent: SQS polling, lease transactions, dispatch to the pool.

The parent owns all queue and lease state; pool children only see S3. Its
loop never blocks on a transfer or a tool, only on a bounded SQS long poll
while slots are free, or on the pool's pipes while they are not.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading

from imposer import backend
from imposer import sweep as sweeping
from imposer.borrowing import BorrowPolicy
from imposer.contention import ContentionMeter
from imposer.errors import BackendError, InvalidMessage, LeaseLost
from imposer.heartbeat import Heartbeat
from imposer.jobs import JobStore
from imposer.leases import Verdict
from imposer.logs import extra
from imposer.models import Fate, JobRequest, JobStatus, Outcome, valid_id
from imposer.pool import Pool
from imposer.queue import Received
from imposer.running import Running, RunningTable
from imposer.task import TaskSpec
from imposer.threads import Periodic
from imposer.wiring import Backends

logger = logging.getLogger(__name__)

#: Exit codes of `imposer run`.
EXIT_OK, EXIT_THREAD_DIED = 0, 5


class Supervisor:
    """Run jobs from the queue in a fixed pool, fairly, until told to stop."""

    def __init__(self, backends: Backends, pool: Pool | None = None, *,
                 max_jobs: int | None = None, exit_when_idle: bool = False,
                 notifier=None) -> None:
        self.b = backends
        self.s = backends.settings
        self.clock = backends.clock
        self.pool = pool or Pool(self.s.slots, self.s)
        self.running = RunningTable()
        self.max_jobs = max_jobs
        self.exit_when_idle = exit_when_idle
        self.notifier = notifier
        self.drain = threading.Event()
        self.fast = threading.Event()
        self.started_jobs = 0
        self.exit_code = EXIT_OK
        self._drain_deadline: float | None = None
        self._empty_poll = False
        self._received_at = 0.0
        slack = 2 * self.s.heartbeat_seconds + 5
        self.overrun_after = self.s.job_timeout_seconds + slack
        self.heartbeat = Periodic("heartbeat", self.s.heartbeat_seconds, Heartbeat(
            self.running, self.b.leases, self.b.queue, self.s.lease_ttl_seconds,
            self.overrun_after, self.clock).beat)
        self.sweeper = Periodic("sweep", self.s.sweep_seconds, lambda: sweeping.sweep(
            self.b.leases, self.b.metrics, self.s.host_id, self.b.queue))
        self.sampler = Periodic("utilisation", self.s.heartbeat_seconds, self.sample)
        self.borrowing = BorrowPolicy(self.s.borrow, self.s.reserve_slots, self.b.leases,
                                      self.b.jobs, self.b.tenants)
        self.borrow_view = Periodic("borrow-view", max(1.0, self.s.defer_seconds),
                                    self.borrowing.refresh)
        self._candidates: list[tuple[JobRequest, Received, int]] = []
        self.contention = ContentionMeter(self.s.slots, 2 * self.s.defer_seconds + 5,
                                          self.clock, self.b.metrics, self.s.host_id)

    # -- the story -----------------------------------------------------------
    def run(self) -> int:
        """Serve until drained or stopped; return the process exit code."""
        self.boot()
        try:
            while not self.fast.is_set():
                self.handle_signals()
                self.collect_finished()
                self.check_health()
                if self.drain.is_set():
                    if not len(self.running) or self.grace_over():
                        break
                    continue
                if self.done_enough():
                    self.begin_drain("nothing left to do")
                    continue
                self.fill_free_slots()
        finally:
            self.shutdown()
        return self.exit_code

    def boot(self) -> None:
        self.install_signals()
        orphans = sweeping.reclaim_host(self.b.leases, self.b.metrics, self.s.host_id,
                                        self.b.queue)
        logger.info("starting %s slots on host %s (engine %s); reclaimed %s orphaned lease(s)",
                    self.s.slots, self.s.host_id, self.s.engine, len(orphans),
                    extra=extra("boot", host=self.s.host_id, slots=self.s.slots,
                                reclaimed=len(orphans)))
        self.pool.start()
        threads = [self.heartbeat, self.sweeper, self.sampler]
        if self.s.borrow:
            self.borrowing.refresh()
            threads.append(self.borrow_view)
        for thread in threads:
            thread.start()

    # -- signals -------------------------------------------------------------
    def install_signals(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        """First signal drains, the second stops fast; only flags are set here."""
        if self.drain.is_set():
            self.fast.set()
        else:
            self.drain.set()

    def handle_signals(self) -> None:
        if self.drain.is_set() and self._drain_deadline is None:
            self.begin_drain("signal")

    def begin_drain(self, why: str) -> None:
        self.drain.set()
        if self._drain_deadline is None:
            self._drain_deadline = self.clock.monotonic() + self.s.grace_seconds
            logger.info("draining (%s): %s job(s) running, grace %ss", why, len(self.running),
                        self.s.grace_seconds, extra=extra("drain", why=why))

    def grace_over(self) -> bool:
        return self._drain_deadline is not None and self.clock.monotonic() > self._drain_deadline

    def done_enough(self) -> bool:
        if self.max_jobs is not None and self.started_jobs >= self.max_jobs:
            return True
        if self.exit_when_idle and self._empty_poll and not len(self.running):
            depth = self.b.queue.depth()
            return depth["visible"] + depth["in_flight"] + depth["delayed"] == 0
        return False

    # -- finished jobs and health ----------------------------------------------
    def collect_finished(self) -> None:
        idle_slots = bool(self.pool.free()) and not self.drain.is_set()
        for event in self.pool.wait(0 if idle_slots else 0.5):
            job = self.running.pop(event.slot)
            if job is None:
                continue
            outcome = event.outcome or Outcome(
                job_id=job.request.job_id, fate=Fate.RETRY, error_kind="child_died",
                reason=f"pool worker died (exit code {event.exitcode})")
            with self.guard(job.request):
                self.complete(job, outcome)

    @contextlib.contextmanager
    def guard(self, request: JobRequest | None):
        """Log a failure to handle one job and carry on: the lease expires, the sweep
        reclaims it and the message returns, so nothing is lost."""
        try:
            yield
        except Exception:
            tenant, job = (request.tenant_id, request.job_id) if request else (None, None)
            logger.exception("error while handling job %s; leaving it to the sweep", job,
                             extra=extra("handler_error", tenant, job))

    def check_health(self) -> None:
        for thread in (self.heartbeat, self.sweeper):
            if not thread.is_alive():
                logger.critical("%s thread is gone; stopping", thread.name,
                                extra=extra("thread_died", thread=thread.name))
                self.exit_code = EXIT_THREAD_DIED
                self.fast.set()
        now = self.clock.monotonic()
        for job in self.running.snapshot():
            if job.lost:
                self.pool.kill(job.slot)
                self.running.pop(job.slot)
                logger.error("killed job %s: its lease was reclaimed; the message will return",
                             job.request.job_id, extra=extra("job_abandoned",
                                                             job.request.tenant_id,
                                                             job.request.job_id))
            elif now - job.started > self.overrun_after:
                self.pool.kill(job.slot)
                self.running.pop(job.slot)
                self.complete(job, Outcome(
                    job_id=job.request.job_id, fate=Fate.RETRY, error_kind="timeout",
                    reason=f"job ran past {self.overrun_after:.0f}s; its pool worker was killed"))

    def sample(self) -> None:
        """Emit slot utilisation and the stranded/shortage split for this host."""
        busy = self.pool.busy_count()
        self.b.metrics.emit("slot_utilisation", 100.0 * busy / self.s.slots, host=self.s.host_id)
        queued = self.b.queue.depth()["visible"] if busy >= self.s.slots else 0
        self.contention.sample(busy, queued)

    # -- new work ---------------------------------------------------------------
    def fill_free_slots(self) -> None:
        free = self.pool.free()
        if not free:
            return
        want = len(free)
        if self.max_jobs is not None:
            want = min(want, self.max_jobs - self.started_jobs)
        messages = self.b.queue.receive(want, self.s.poll_seconds, self.s.lease_ttl_seconds)
        self._received_at = self.clock.monotonic()
        self._empty_poll = not messages
        self._candidates = []
        for message in messages:
            if self.drain.is_set() or not free:
                self.b.queue.change_visibility(message, 0)
                continue
            with self.guard(None):
                if self.handle(message, free[0]):
                    free.pop(0)
        self.lend_idle_slots(free)

    def lend_idle_slots(self, free: list[int]) -> None:
        """After every tenant below its cap had its turn, let capped ones borrow, or defer."""
        for request, message, cap in self._candidates:
            with self.guard(request):
                why_not = self.borrowing.allows(request.tenant_id, len(free))
                if why_not is None and not self.drain.is_set():
                    acq = self.b.leases.acquire(request, self.s.host_id, free[0],
                                                message.sent_at, message.receipt, borrow=True)
                    if acq.verdict == Verdict.ACQUIRED:
                        self.launch(request, message, free.pop(0), acq.lease)
                        self.b.metrics.emit("borrowed", 1, tenant_id=request.tenant_id)
                        continue
                    why_not = "the tenant dropped below its cap meanwhile"
                self.defer_at_cap(request, message, cap, f"not borrowing: {why_not}")
        self._candidates = []

    def handle(self, message: Received, slot: int) -> bool:
        """Start *message*'s job on *slot*, or defer, drop or reject it; True if started."""
        try:
            request = self.parse(message)
        except InvalidMessage as exc:
            self.reject(message, exc)
            return False
        try:
            return self.start(request, message, slot)
        except BackendError as exc:
            logger.error("could not take job %s: %s; it will come back", request.job_id, exc,
                         extra=extra("acquire_error", request.tenant_id, request.job_id))
            self.b.queue.change_visibility(message, self.s.defer_seconds)
            return False

    def parse(self, message: Received) -> JobRequest:
        request = JobRequest.from_body(message.body)
        if message.group_id is None:
            logger.warning("message for %s has no MessageGroupId (layer 1 fairness is off)",
                           request.tenant_id,
                           extra=extra("no_group_id", request.tenant_id, request.job_id))
        elif message.group_id != request.tenant_id:
            raise InvalidMessage(f"MessageGroupId {message.group_id!r} is not the tenant "
                                 f"{request.tenant_id!r}")
        request.check_prefix(self.s.bucket)
        return request

    def reject(self, message: Received, exc: InvalidMessage) -> None:
        """Record why, move the message to the DLQ ourselves, delete it."""
        job_id = tenant = None
        try:
            data = json.loads(message.body)
            if isinstance(data, dict) and valid_id(data.get("job_id")) \
                    and valid_id(data.get("tenant_id")):
                job_id, tenant = data["job_id"], data["tenant_id"]
        except ValueError:
            pass
        logger.error("rejected message %s: %s", message.message_id, exc,
                     extra=extra("invalid_message", tenant, job_id, message_id=message.message_id))
        if job_id:
            self.b.jobs.finish_unleased(job_id, tenant, JobStatus.FAILED, str(exc), exc.kind)
        self.b.queue.dead_letter(message, str(exc))
        self.b.metrics.emit("jobs", 1, outcome="invalid", tenant_id=tenant)

    def start(self, request: JobRequest, message: Received, slot: int,
              stale_retry: bool = True) -> bool:
        acq = self.b.leases.acquire(request, self.s.host_id, slot, message.sent_at,
                                    message.receipt)
        ctx = extra("", request.tenant_id, request.job_id)
        if acq.verdict == Verdict.ACQUIRED:
            self.launch(request, message, slot, acq.lease)
            return True
        if acq.verdict == Verdict.AT_CAP:
            if self.s.borrow and acq.cap > 0:
                self._candidates.append((request, message, acq.cap))
            else:
                self.defer_at_cap(request, message, acq.cap)
        elif acq.verdict == Verdict.RUNNING:
            self.b.metrics.emit("duplicate", 1, tenant_id=request.tenant_id)
            logger.info("job %s already runs elsewhere; keeping this copy back", request.job_id,
                        extra={**ctx, "action": "duplicate_running"})
            self.defer(request, message, None)
        elif acq.verdict == Verdict.DONE:
            self.b.metrics.emit("duplicate", 1, tenant_id=request.tenant_id)
            logger.info("job %s already %s; deleting the duplicate", request.job_id, acq.status,
                        extra={**ctx, "action": "duplicate_done"})
            self.b.queue.delete(message)
        elif acq.verdict == Verdict.STALE and stale_retry:
            sweeping.reclaim_expired(self.b.leases, self.b.metrics, acq.holder, self.s.host_id)
            return self.start(request, message, slot, stale_retry=False)
        else:
            self.defer(request, message, "waiting for a stale lease to be swept")
        return False

    def launch(self, request: JobRequest, message: Received, slot: int, lease) -> None:
        """Hand a leased job to the pool and account its queue wait."""
        wait = max(0.0, lease.acquired_at - (request.submitted_at or message.sent_at))
        self.running.add(Running(slot=slot, request=request, message=message, lease=lease,
                                 started=self.clock.monotonic(), received=self._received_at))
        self.pool.submit(slot, TaskSpec(request=request))
        self.contention.started(request.job_id)
        self.started_jobs += 1
        dispatch_ms = 1000 * (self.clock.monotonic() - self._received_at)
        self.b.metrics.emit("queue_wait", round(wait, 3), tenant_id=request.tenant_id)
        logger.info("started job %s on slot %s after %.1fs in queue%s", request.job_id, slot,
                    wait, " (borrowed slot)" if lease.borrowed else "",
                    extra=extra("job_started", request.tenant_id, request.job_id, slot=slot,
                                queue_wait=wait, borrowed=lease.borrowed,
                                dispatch_ms=round(dispatch_ms, 2)))

    def defer_at_cap(self, request: JobRequest, message: Received, cap: int,
                     note: str | None = None) -> None:
        self.b.metrics.emit("cap_defer", 1, tenant_id=request.tenant_id)
        self.contention.deferred(request.tenant_id, request.job_id)
        reason = f"at tenant cap: {request.tenant_id} holds all {cap} of its slots"
        self.defer(request, message, f"{reason}; {note}" if note else reason, cap=True)

    def defer(self, request: JobRequest, message: Received, reason: str | None,
              cap: bool = False) -> None:
        """Push the message back; re-publish it first if SQS would soon drop it."""
        age = self.clock.time() - message.sent_at
        if (age > self.s.retention_seconds - self.s.republish_margin_seconds
                or message.receive_count >= self.s.republish_receive_count):
            import attrs

            body = attrs.evolve(request, submitted_at=request.submitted_at or message.sent_at)
            new_id = self.b.queue.republish(message, body.to_body())
            logger.warning("re-published job %s (age %.0fs, received %s times) as %s",
                           request.job_id, age, message.receive_count, new_id,
                           extra=extra("republished", request.tenant_id, request.job_id))
        else:
            self.b.queue.change_visibility(message, self.s.defer_seconds)
        if reason:
            self.b.jobs.note_waiting(request, message.sent_at, reason, deferred=cap)
            if cap:
                logger.info("deferred job %s: %s", request.job_id, reason,
                            extra=extra("cap_defer", request.tenant_id, request.job_id))

    # -- completion ---------------------------------------------------------------
    def complete(self, job: Running, outcome: Outcome) -> None:
        """Release the lease with the job's state, then settle its message."""
        req, now, settle_from = job.request, self.clock.time(), self.clock.monotonic()
        fields = {"run_seconds": round(self.clock.monotonic() - job.started, 3),
                  "error": outcome.reason, "error_kind": outcome.error_kind}
        failures = count = 0
        if outcome.fate == Fate.SUCCEEDED:
            status = JobStatus.SUCCEEDED
            fields.update(error=None, error_kind=None)
        elif outcome.fate == Fate.FAILED:
            status = JobStatus.FAILED
        elif outcome.fate == Fate.RETRY:
            record = self.b.jobs.get(req.job_id)
            failures = 1
            count = (record.failures if record else 0) + 1
            status = JobStatus.DEAD if count >= self.s.max_attempts else JobStatus.RETRYING
            if status == JobStatus.RETRYING:
                fields["wait_reason"] = (f"retrying after failure {count} of "
                                         f"{self.s.max_attempts}: {outcome.reason}")
        else:
            status = JobStatus.RETRYING
            fields["wait_reason"] = f"licence unavailable, retrying: {outcome.reason}"
        if status.final:
            fields["finished_at"] = now
        try:
            self.b.leases.release(job.lease, status, failures=failures, **fields)
        except LeaseLost as exc:
            logger.error("job %s finished but %s; its message will return", req.job_id, exc,
                         extra=extra("lease_lost", req.tenant_id, req.job_id))
            return
        except BackendError as exc:
            logger.error("could not release job %s: %s; the sweep will reclaim it", req.job_id,
                         exc, extra=extra("release_error", req.tenant_id, req.job_id))
            return
        self.settle_message(job, status, outcome, count)
        fields["settle_ms"] = round(1000 * (self.clock.monotonic() - settle_from), 2)
        self.b.metrics.emit("jobs", 1, outcome=status.value, tenant_id=req.tenant_id)
        logger.info("job %s %s: %s", req.job_id, status.value, outcome.reason or "ok",
                    extra=extra("job_finished", req.tenant_id, req.job_id, status=status.value,
                                slot=job.slot, **fields))
        if status.final and self.notifier is not None and req.webhook:
            self.notifier.job_finished(req, status, fields)

    def settle_message(self, job: Running, status: JobStatus, outcome: Outcome,
                       failures: int) -> None:
        queue = self.b.queue
        if status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
            queue.delete(job.message)
        elif status == JobStatus.DEAD:
            queue.dead_letter(job.message, outcome.reason or "too many failures")
        elif outcome.fate == Fate.RETRY:
            queue.change_visibility(job.message, self.s.retry_seconds * 2 ** (failures - 1))
        else:
            queue.change_visibility(job.message, self.s.defer_seconds)

    # -- the fixed stop order -----------------------------------------------------
    def shutdown(self) -> None:
        """Stop pool, then threads, then hand back unfinished jobs and their messages."""
        if not self.fast.is_set():
            self.collect_finished()
        self.pool.stop(timeout=0 if self.fast.is_set() else 5)
        for thread in (self.heartbeat, self.sweeper, self.sampler, self.borrow_view):
            thread.stop()
        for job in self.running.snapshot():
            self.running.pop(job.slot)
            req = job.request
            try:
                self.b.leases.release(job.lease, JobStatus.QUEUED, wait_reason=(
                    f"worker {self.s.host_id} stopped before finishing; returned to the queue"))
            except (LeaseLost, BackendError) as exc:
                logger.error("could not release %s on stop: %s", req.job_id, exc,
                             extra=extra("release_error", req.tenant_id, req.job_id))
            self.b.queue.change_visibility(job.message, 0)
            logger.warning("returned unfinished job %s to the queue", req.job_id,
                           extra=extra("job_returned", req.tenant_id, req.job_id))
        if self.notifier is not None:
            self.notifier.stop()
        logger.info("stopped (started %s job(s))", self.started_jobs,
                    extra=extra("stopped", started=self.started_jobs,
                                aws_calls=backend.CALLS.snapshot()))
