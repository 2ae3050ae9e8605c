"""The long-running parent: SQS polling, lease transactions, dispatch to the pool.

The parent owns all queue and lease state; pool children only see S3. Its
loop never blocks on a transfer or a tool, only on a bounded SQS long poll
while slots are free, or on the pool's pipes while they are not.
"""

from __future__ import annotations

import logging
import signal
import threading

from imposer.aws import session
from imposer.errors import BackendError, LeaseLost
from imposer.logs import extra, guard
from imposer.models import Fate, JobStatus, Outcome
from imposer.models.exits import Exit
from imposer.worker import sweep as sweeping
from imposer.worker.borrowing import BorrowPolicy
from imposer.worker.completion import Completer, Notifier
from imposer.worker.contention import ContentionMeter
from imposer.worker.dispatch import Dispatcher
from imposer.worker.heartbeat import Heartbeat
from imposer.worker.messages import Messages
from imposer.worker.overrun import OverrunPolicy
from imposer.worker.pool import Pool
from imposer.worker.running import RunningTable
from imposer.worker.threads import Periodic
from imposer.worker.wiring import Backends

logger = logging.getLogger(__name__)


class Supervisor:
    """Run jobs from the queue in a fixed pool, fairly, until told to stop."""

    def __init__(self, backends: Backends, pool: Pool | None = None, *,
                 max_jobs: int | None = None, exit_when_idle: bool = False,
                 notifier: Notifier | None = None) -> None:
        s = self.settings = backends.settings
        self.queue, self.leases, self.metrics = backends.queue, backends.leases, backends.metrics
        self.clock = backends.clock
        self.pool = pool or Pool(s.slots, s)
        self.running = RunningTable()
        self.max_jobs = max_jobs
        self.exit_when_idle = exit_when_idle
        self.notifier = notifier
        self.drain = threading.Event()
        self.fast = threading.Event()
        #: Set once the pool and the threads are up.
        self.booted = threading.Event()
        self.exit_code = Exit.OK
        self._drain_deadline: float | None = None
        self._empty_poll = False
        self.messages = Messages(backends.queue, s, self.clock)
        self.overrun = OverrunPolicy(job_timeout=s.job_timeout_seconds,
                                     heartbeat=s.heartbeat_seconds)
        self.heartbeat = Periodic("heartbeat", s.heartbeat_seconds, Heartbeat(
            self.running, self.leases, self.messages, self.overrun, self.clock).beat)
        self.sweeper = Periodic("sweep", s.sweep_seconds, lambda: sweeping.sweep(
            self.leases, self.metrics, s.host_id, self.messages))
        self.sampler = Periodic("utilisation", s.heartbeat_seconds, self.sample)
        self.borrowing = BorrowPolicy(s.borrow, s.reserve_slots, self.leases, backends.jobs,
                                      backends.tenants)
        self.borrow_view = Periodic("borrow-view", max(1.0, s.defer_seconds),
                                    self.borrowing.refresh)
        self.contention = ContentionMeter(s.slots, 2 * s.defer_seconds + 5, self.clock,
                                          self.metrics, s.host_id)
        self.dispatch = Dispatcher(
            s, leases=self.leases, jobs=backends.jobs, messages=self.messages,
            metrics=self.metrics, pool=self.pool, running=self.running,
            contention=self.contention, borrowing=self.borrowing, overrun=self.overrun,
            clock=self.clock)
        self.completer = Completer(s, leases=self.leases, jobs=backends.jobs,
                                   messages=self.messages, metrics=self.metrics,
                                   clock=self.clock, notifier=notifier)
        self.threads = [self.heartbeat, self.sweeper, self.sampler]
        if s.borrow:
            self.threads.append(self.borrow_view)

    # -- the story -----------------------------------------------------------
    def run(self) -> int:
        """Serve until drained or stopped; return the process exit code."""
        self.boot()
        try:
            while not self.fast.is_set():
                self.handle_signals()
                self.collect_finished()
                self.check_health()
                self.check_overruns()
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
        orphans = sweeping.reclaim_host(self.leases, self.metrics, self.settings.host_id,
                                        self.messages)
        logger.info("starting %s slots on host %s (engine %s); reclaimed %s orphaned lease(s)",
                    self.settings.slots, self.settings.host_id, self.settings.engine,
                    len(orphans), extra=extra("boot", host=self.settings.host_id,
                                              slots=self.settings.slots,
                                              reclaimed=len(orphans)))
        self.pool.start()
        if self.settings.borrow:
            self.borrowing.refresh()
        for thread in self.threads:
            thread.start()
        self.booted.set()

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
            self._drain_deadline = self.clock.monotonic() + self.settings.grace_seconds
            logger.info("draining (%s): %s job(s) running, grace %ss", why, len(self.running),
                        self.settings.grace_seconds, extra=extra("drain", why=why))

    def grace_over(self) -> bool:
        return self._drain_deadline is not None and self.clock.monotonic() > self._drain_deadline

    def done_enough(self) -> bool:
        if self.max_jobs is not None and self.dispatch.started >= self.max_jobs:
            return True
        if self.exit_when_idle and self._empty_poll and not len(self.running):
            depth = self.queue.depth()
            return depth["visible"] + depth["in_flight"] + depth["delayed"] == 0
        return False

    # -- finished jobs and health ----------------------------------------------
    def collect_finished(self) -> None:
        """Settle jobs that ended; then refill freed slots from their tenants' deferred work.

        Every event of the batch is settled before any slot is refilled: the
        pool marks a slot free as soon as its outcome arrives, and a slot must
        not take a new job while its old one is still in the running table.
        """
        idle_slots = bool(self.pool.free()) and not self.drain.is_set()
        freed: list[str] = []
        for event in self.pool.wait(0 if idle_slots else 0.5):
            job = self.running.pop(event.slot)
            if job is None:
                continue
            outcome = event.outcome or Outcome(
                job_id=job.request.job_id, fate=Fate.RETRY, error_kind="child_died",
                reason=f"pool worker died (exit code {event.exitcode})")
            with guard(job.request):
                if self.completer.complete(job, outcome) is not None:
                    freed.append(job.request.tenant_id)
        for tenant in freed:
            with guard(None):
                self.dispatch.wake(tenant, self.pool.free(), self.drain.is_set)

    def check_health(self) -> None:
        """Stop the worker if a background thread is gone: never run unsupervised."""
        watched = [(t.name, t.is_alive()) for t in self.threads]
        if self.notifier is not None:
            watched.append(("webhooks", self.notifier.is_alive()))
        for name, alive in watched:
            if not alive:
                logger.critical("%s thread is gone; stopping", name,
                                extra=extra("thread_died", thread=name))
                self.exit_code = Exit.THREAD_DIED
                self.fast.set()

    def check_overruns(self) -> None:
        """Kill the slot of a job whose lease was reclaimed or that ran past its limit."""
        now = self.clock.monotonic()
        for job in self.running.snapshot():
            if job.lost:
                self.pool.kill(job.slot)
                self.running.pop(job.slot)
                logger.error("killed job %s: its lease was reclaimed; the message will return",
                             job.request.job_id, extra=extra("job_abandoned",
                                                             job.request.tenant_id,
                                                             job.request.job_id))
            elif self.overrun.overran(job.started, now):
                self.pool.kill(job.slot)
                self.running.pop(job.slot)
                self.completer.complete(job, Outcome(
                    job_id=job.request.job_id, fate=Fate.RETRY, error_kind="timeout",
                    reason=f"job ran past {self.overrun.limit:.0f}s; its pool worker was killed"))

    def sample(self) -> None:
        """Emit slot utilisation and the stranded/shortage split for this host."""
        busy = self.pool.busy_count()
        self.metrics.emit("slot_utilisation", 100.0 * busy / self.settings.slots,
                          host=self.settings.host_id)
        queued = self.queue.depth()["visible"] if busy >= self.settings.slots else 0
        self.contention.sample(busy, queued)

    # -- new work ---------------------------------------------------------------
    def fill_free_slots(self) -> None:
        """Receive at most as many messages as there are free slots, and dispatch them."""
        free = self.pool.free()
        if not free:
            return
        want = len(free)
        if self.max_jobs is not None:
            want = min(want, self.max_jobs - self.dispatch.started)
        messages = self.queue.receive(want, self.settings.poll_seconds,
                                      self.settings.lease_ttl_seconds)
        self._empty_poll = not messages
        self.dispatch.take_batch(messages, free, self.drain.is_set)

    # -- the fixed stop order -----------------------------------------------------
    def shutdown(self) -> None:
        """Stop pool, then threads, then hand back unfinished jobs and their messages."""
        if not self.fast.is_set():
            self.collect_finished()
        self.pool.stop(timeout=0 if self.fast.is_set() else 5)
        for thread in self.threads:
            thread.stop()
        for job in self.running.snapshot():
            self.running.pop(job.slot)
            req = job.request
            try:
                self.leases.release(job.lease, JobStatus.QUEUED, wait_reason=(
                    f"worker {self.settings.host_id} stopped before finishing; "
                    "returned to the queue"))
            except (LeaseLost, BackendError) as exc:
                logger.error("could not release %s on stop: %s", req.job_id, exc,
                             extra=extra("release_error", req.tenant_id, req.job_id))
            self.messages.give_back(job.message)
            logger.warning("returned unfinished job %s to the queue", req.job_id,
                           extra=extra("job_returned", req.tenant_id, req.job_id))
        returned = self.dispatch.give_back_deferred()
        self.completer.stop()
        logger.info("stopped (started %s job(s); %s deferred message(s) given back)",
                    self.dispatch.started, returned,
                    extra=extra("stopped", started=self.dispatch.started,
                                aws_calls=session.CALLS.snapshot()))
