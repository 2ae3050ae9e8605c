"""The long-running parent: SQS polling, lease transactions, dispatch to the pool.

The parent owns all queue and lease state; pool children only see S3. Its
loop never blocks on a transfer, a tool or a receive: it waits on the pool's
pipes and on the receiver thread's wake-up together (``receiver``), so a
child that finishes during a long poll is settled, and its slot refilled,
at once. An AWS
error that may pass never ends it: receiving backs off, settling retries,
and only configuration errors (a missing table or queue, no credentials)
stop the worker.
"""

from __future__ import annotations

import logging
import threading

from imposer.aws import session
from imposer.aws.s3 import Storage
from imposer.logs import extra, guard
from imposer.models import Fate, Outcome
from imposer.models.exits import Exit
from imposer.webhooks.delivery import WebhookSender
from imposer.worker.threads import sweep as sweeping
from imposer.worker.boot import Patience, StoppedWhileBooting, check_resources
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.settle.completion import Completer, Settled
from imposer.worker.dispatch.contention import ContentionMeter
from imposer.worker.dispatch.dispatcher import Dispatcher
from imposer.worker.dispatch.handoff import HandOff
from imposer.worker.threads.heartbeat import LeaseRenewer, MessageHolder
from imposer.worker.receive.intake import Intake
from imposer.worker.messages import Messages
from imposer.webhooks.outbox import OutboxSender, parse_schedule
from imposer.worker.overrun import OverrunPolicy
from imposer.worker.dispatch.pool import Pool
from imposer.worker.receive.receiver import Receiver
from imposer.worker.settle.refill import Promise, Refiller
from imposer.worker.threads.rollup import RollupRecorder
from imposer.worker.receive.senders import SenderCheck
from imposer.worker.running import RunningTable
from imposer.worker.dispatch.shares import SharePolicy
from imposer.worker.signals import StopRequests
from imposer.worker.threads.periodic import Periodic
from imposer.worker.timing import LeaseTiming
from imposer.worker.wiring import Backends

logger = logging.getLogger(__name__)


class Supervisor:
    """Run jobs from the queue in a fixed pool, fairly, until told to stop."""

    def __init__(self, backends: Backends, pool: Pool | None = None, *,
                 max_jobs: int | None = None, exit_when_idle: bool = False,
                 sender: WebhookSender | None = None) -> None:
        s = self.settings = backends.settings
        self.queue, self.leases, self.metrics = backends.queue, backends.leases, backends.metrics
        self.jobs, self.tenants, self.clock = backends.jobs, backends.tenants, backends.clock
        self.pool = pool or Pool(s.slots, s)
        self.running = RunningTable()
        self.max_jobs = max_jobs
        self.exit_when_idle = exit_when_idle
        self.stops = StopRequests(s.grace_seconds, self.clock)
        self.drain, self.fast = self.stops.drain, self.stops.fast
        #: Set once the pool and the threads are up.
        self.booted = threading.Event()
        self.exit_code = Exit.OK
        storage = Storage(s.region)
        self.messages = Messages(backends.queue, s, self.clock)
        self.overrun = OverrunPolicy(job_timeout=s.job_timeout_seconds,
                                     heartbeat=s.heartbeat_seconds)
        self.timing = LeaseTiming.from_settings(s)
        self.rollups = RollupRecorder(backends.rollups, s.host_id, s.slots, self.clock)
        self.sender = OutboxSender(
            backends.outbox, backends.tenants, backends.jobs, storage,
            sender or WebhookSender(allow_http_loopback=s.allow_http_loopback),
            parse_schedule(s.webhook_schedule), s.webhook_poll_seconds, self.clock,
            metrics=self.metrics)
        self.borrowing = BorrowPolicy(s.borrow, s.reserve_slots, self.leases, backends.jobs,
                                      backends.tenants)
        self.contention = ContentionMeter(s.slots, 2 * s.defer_seconds + 5, self.clock,
                                          self.metrics, s.host_id)
        self.receiver = Receiver(backends.queue, s.poll_seconds, self.timing.visibility,
                                 self.clock)
        self.handoff = HandOff(s, backends.waiting, self.messages, self.clock)
        self.shares = SharePolicy(s, leases=self.leases, jobs=backends.jobs,
                                  tenants=backends.tenants, running=self.running,
                                  clock=self.clock)
        self.dispatch = Dispatcher(
            s, leases=self.leases, jobs=backends.jobs, storage=storage, messages=self.messages,
            handoff=self.handoff, metrics=self.metrics, rollups=self.rollups, pool=self.pool,
            running=self.running, contention=self.contention, borrowing=self.borrowing,
            overrun=self.overrun, senders=SenderCheck(
                backends.tenants, trusted=s.trusted_senders, require=s.require_senders,
                whoami=lambda: session.caller_identity(s.region)[0]["UserId"]),
            clock=self.clock, outbox=backends.outbox, shares=self.shares)
        self.refill = Refiller(
            s, dispatch=self.dispatch, leases=self.leases, handoff=self.handoff,
            messages=self.messages, metrics=self.metrics, pool=self.pool, running=self.running,
            borrowing=self.borrowing, clock=self.clock, shares=self.shares)
        self.intake = Intake(
            receiver=self.receiver, dispatch=self.dispatch, refill=self.refill, pool=self.pool,
            queue=self.queue, messages=self.messages, jobs=self.jobs, tenants=self.tenants,
            clock=self.clock)
        self.refill.look = self.intake.look
        self.completer = Completer(
            s, table=self.running, leases=self.leases, jobs=backends.jobs,
            outbox=backends.outbox, storage=storage, messages=self.messages,
            metrics=self.metrics, rollups=self.rollups, clock=self.clock,
            wake_sender=self.sender.wake)
        self.threads = [
            Periodic("lease-renewer", s.heartbeat_seconds, LeaseRenewer(
                self.running, self.leases, self.overrun, self.timing, self.clock,
                self.pool.fence).beat),
            Periodic("message-holder", s.heartbeat_seconds,
                     MessageHolder(self.running, self.messages).beat),
            Periodic("sweep", s.sweep_seconds, lambda: sweeping.sweep(
                self.leases, self.metrics, s.host_id, self.messages)),
            Periodic("utilisation", s.heartbeat_seconds, self.sample),
            Periodic("rollups", s.rollup_seconds, self.rollups.flush),
        ]
        self.threads.append(Periodic("waiting-view", s.redrive_seconds, self.borrowing.refresh))
        if self.shares.enabled:
            self.threads.append(Periodic("share-view", s.redrive_seconds, self.refresh_shares))
        self.threads.append(self.sender)

    # -- the story -----------------------------------------------------------
    def run(self) -> int:
        """Serve until drained or stopped; return the process exit code."""
        if not self.boot():
            return self.exit_code
        try:
            while not self.fast.is_set():
                self.stops.handle(len(self.running))
                self.collect_finished()
                self.settle_finished()
                self.check_health()
                self.check_overruns()
                if self.drain.is_set():
                    self.intake.give_back_received()
                    if not len(self.running) or self.stops.grace_over():
                        break
                    continue
                if self.done_enough():
                    self.stops.begin_drain("nothing left to do", len(self.running))
                    continue
                self.redrive_parked()
                self.fill_free_slots()
        finally:
            self.shutdown()
        return self.exit_code

    def boot(self) -> bool:
        """Reach AWS (riding out a network that is not up yet), clear leftovers, start.

        Return False when told to stop before AWS answered: nothing was started
        and nothing is held, so there is nothing to hand back.
        """
        self.stops.install()
        self.pool.clear_leftovers()  # before AWS: an earlier run's helper must not outlive it
        patiently = Patience(self.settings.boot_retry_seconds, self.clock, self.drain,
                             self.fast)
        try:
            patiently("boot", lambda: check_resources(self.queue, self.leases.dynamo,
                                                      self.settings))
            orphans = patiently("boot", lambda: sweeping.reclaim_host(
                self.leases, self.metrics, self.settings.host_id, self.messages))
            if self.settings.borrow:
                patiently("borrow view", self.borrowing.refresh)
            if self.shares.enabled:
                patiently("share view", self.shares.refresh)
        except StoppedWhileBooting as exc:
            logger.info("stopped while booting: %s", exc,
                        extra=extra("stopped", started=0, booted=False))
            return False
        logger.info("starting %s slots on host %s (engine %s); reclaimed %s orphaned lease(s)",
                    self.settings.slots, self.settings.host_id, self.settings.engine,
                    len(orphans), extra=extra("boot", host=self.settings.host_id,
                                              slots=self.settings.slots,
                                              reclaimed=len(orphans)))
        self.pool.start()
        for thread in self.threads:
            thread.start()
        self.booted.set()
        return True

    def done_enough(self) -> bool:
        if self.max_jobs is not None and self.dispatch.launcher.started >= self.max_jobs:
            return True
        return self.exit_when_idle and not len(self.running) and self.intake.idle()

    # -- finished jobs and health ----------------------------------------------
    def collect_finished(self, wait: float | None = None) -> None:
        """Take the outcomes the pool has for us; their slots are free from now on."""
        if wait is None:
            wait = 0.5
            if self.receiver.busy or self.drain.is_set():
                pass  # woken by a child or by the receive's result, whichever comes first
            elif self.pool.free() and not self.fast.is_set():
                wait = max(0.0, min(0.5, self.intake.paused_until - self.clock.monotonic()))
        for event in self.pool.wait(wait, (self.receiver.wake_fd,)):
            job = self.running.in_slot(event.slot)
            if job is None:
                continue
            outcome = event.outcome or Outcome(
                job_id=job.request.job_id, fate=Fate.RETRY, error_kind="child_died",
                reason=f"pool worker died (exit code {event.exitcode})")
            self.completer.finished(job, outcome)

    def settle_finished(self, force: bool = False) -> None:
        """Settle every finished job that is due; then refill freed slots from deferred work.

        A job whose slot was promised to its tenant's oldest parked job, or
        (a borrowed slot) to the parked job the borrow rule lends it to
        (``Refiller.promise_slot``), starts that job with its release, in
        one transaction; the other settlements of the pass come before any
        refill, so a tenant's counter is down before its next job is tried.
        """
        now, freed = self.clock.monotonic(), []
        for job in self.running.settling():
            if force or job.retry_at <= now:
                with guard(job.request):
                    job = self.completer.decide(job)  # its end is recorded before any start
                    promise, job = self.refill.promise_slot(job, self.drain.is_set)
                    settled = self.completer.settle(job)
                    tried = self.completer.handover(job)
                    if tried is not None:
                        handover, committed = tried
                        if self.refill.start_handed(handover, job.slot, committed,
                                                      self.drain.is_set):
                            if handover.successor.lease.borrowed:  # as after any borrowed
                                freed.append((job.request.tenant_id, True))  # job: lend more
                            continue  # the slot went to a parked job with the release
                    if settled is Settled.DONE and (promise is not Promise.NOTHING_PARKED
                                                    or self.shares.enabled):
                        freed.append((job.request.tenant_id, job.lease.borrowed))
        for tenant, borrowed in freed:
            with guard(None):
                self.refill.wake(tenant, self.pool.free(), self.drain.is_set, borrowed)

    def check_health(self) -> None:
        """Stop the worker if a background thread is gone: never run unsupervised."""
        for thread in self.threads + [self.receiver] * (self.receiver.ident is not None):
            if not thread.is_alive():
                logger.critical("%s thread is gone; stopping", thread.name,
                                extra=extra("thread_died", thread=thread.name))
                self.exit_code = Exit.THREAD_DIED
                self.fast.set()

    def check_overruns(self) -> None:
        """Kill the slot of a job whose lease was lost or that ran past its limit.

        A result already waiting in the slot's pipe is collected first, never
        thrown away by a kill.
        """
        now = self.clock.monotonic()
        for job in self.running.running():
            if self.pool.has_result(job.slot):
                continue
            if job.lost:
                self.pool.kill(job.slot)
                self.running.remove(job)
                logger.error("killed job %s: its lease was reclaimed; the message will return",
                             job.request.key, extra=extra("job_abandoned", job.request.tenant_id,
                                                          job.request.job_id))
            elif self.overrun.overran(job.started, now):
                self.pool.kill(job.slot)
                self.completer.finished(job, Outcome(
                    job_id=job.request.job_id, fate=Fate.RETRY, error_kind="timeout",
                    reason=f"job ran past {self.overrun.limit:.0f}s; its pool worker was killed"))

    def sample(self) -> None:
        """Emit this host's slot utilisation, parked backlog, oldest due webhook and the
        stranded/shortage split."""
        busy, host = self.pool.busy_count(), self.settings.host_id
        self.metrics.emit("slot_utilisation", 100.0 * busy / self.settings.slots, host=host)
        self.metrics.emit("backlog", self.handoff.parked_here(), host=host)
        self.metrics.emit("webhook_oldest_pending", round(self.sender.oldest_pending, 3),
                          host=host)
        queued = self.queue.depth()["visible"] if busy >= self.settings.slots else 0
        stranded, stranded_time, shortage = self.contention.sample(busy, queued)
        self.rollups.contention(stranded, stranded_time, shortage, self.clock.time())

    def refresh_shares(self) -> None:
        """Fair share: re-read who waits and the usage (a background pass), and say each
        active tenant's share gap (``share_gap``: its fraction of recent licence time minus
        its weighted share)."""
        self.shares.refresh()
        for tenant, gap in self.shares.gaps().items():
            self.metrics.emit("share_gap", round(100 * gap, 2), tenant_id=tenant)

    # -- new work ---------------------------------------------------------------
    def redrive_parked(self) -> None:
        """Once per read of the waiting view: start parked jobs that no hand-off reached, and
        lend idle slots to capped tenants' parked jobs when borrowing is on."""
        with guard(None):
            self.refill.redrive(self.pool.free(), self.drain.is_set, self.intake.empty_poll)

    def fill_free_slots(self) -> None:
        """Dispatch what the receiver brought; ask for more (one per free slot, and room
        for parking)."""
        self.intake.fill(self.drain.is_set, self.max_jobs)

    # -- the fixed stop order -----------------------------------------------------
    def shutdown(self) -> None:
        """Settle what finished, stop the pool, then threads, then hand back the rest.

        Even a fast stop first reads the results already waiting in the pipes:
        a job that finished is settled, never returned to run again.
        """
        self.collect_finished(wait=0 if self.fast.is_set() else 0.5)
        self.settle_finished(force=True)
        for event in self.pool.stop(timeout=0 if self.fast.is_set() else 5):
            job = self.running.in_slot(event.slot)
            if job is not None:
                self.completer.finished(job, event.outcome)
        self.settle_finished(force=True)
        for thread in self.threads:
            thread.stop()
        for message in self.intake.take_looked() + self.receiver.stop(
                0 if self.fast.is_set() else self.settings.poll_seconds + 5):
            self.messages.give_back_quietly(message)
        for job in self.running.snapshot():
            self.completer.hand_back(job)
        returned = self.dispatch.give_back_parked()
        self.rollups.flush()
        logger.info("stopped (started %s job(s); %s parked message(s) given back)",
                    self.dispatch.launcher.started, returned,
                    extra=extra("stopped", started=self.dispatch.launcher.started,
                                aws_calls=session.CALLS.snapshot()))
