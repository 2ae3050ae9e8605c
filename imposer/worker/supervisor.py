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
from typing import Callable

import attrs

from imposer.aws import session
from imposer.logs import extra, guard
from imposer.models.exits import Exit
from imposer.settings import Settings
from imposer.worker import executor
from imposer.worker.boot import Startup
from imposer.worker.dispatch.dispatcher import Dispatcher
from imposer.worker.dispatch.pool import Pool
from imposer.worker.reaping import Reaper
from imposer.worker.receive.intake import Intake
from imposer.worker.receive.receiver import Receiver
from imposer.worker.running import RunningTable
from imposer.worker.settle.refill import Refiller
from imposer.worker.settle.settler import Settler
from imposer.worker.signals import StopRequests
from imposer.worker.steps import Step

logger = logging.getLogger(__name__)


@attrs.frozen
class Until:
    """When the worker stops by itself: after *max_jobs* starts, or (*idle*) once nothing
    runs and the queue holds nothing it could take. By default it serves until told."""

    max_jobs: int | None = None
    idle: bool = False

    def left(self, started: int) -> int | None:
        """Jobs it may still start after *started* (None: no limit)."""
        return None if self.max_jobs is None else self.max_jobs - started

    def reached(self, started: int, running: int, idle: Callable[[], bool]) -> bool:
        """True once the worker has done enough; *idle* (``Intake.idle``, which may ask
        AWS) is called only when nothing runs and it is to stop when idle."""
        if self.max_jobs is not None and started >= self.max_jobs:
            return True
        return self.idle and not running and idle()


class Supervisor:
    """Run jobs from the queue in a fixed pool, fairly, until told to stop.

    Built by ``imposer.worker.wiring.build``, which makes every part it runs.
    """

    def __init__(self, settings: Settings, *, stops: StopRequests, startup: Startup,
                 reaper: Reaper, threads: list[threading.Thread], intake: Intake,
                 dispatch: Dispatcher, settler: Settler, running: RunningTable,
                 until: Until = Until()) -> None:
        #: The settings it runs under (the loop itself reads none: operators and tests do).
        self.settings, self.stops, self.startup, self.reaper = settings, stops, startup, reaper
        self.drain, self.fast = stops.drain, stops.fast
        #: The side threads, each checked by ``check_health`` (the intake's receiver too,
        #: once up).
        self.threads = threads
        self.intake, self.dispatch, self.settler = intake, dispatch, settler
        #: This host's running jobs (how many run decides a drain's end).
        self.running = running
        #: When it stops by itself (``imposer run --max-jobs/--exit-when-idle``).
        self.until = until
        #: Set once the pool and the threads are up.
        self.booted = threading.Event()
        self.exit_code = Exit.OK
        #: Parked messages made visible again: at the drain's start, and any left at the stop.
        self.parked_returned = 0

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
                    self.hand_back_waiting()
                    if not len(self.running) or self.stops.grace_over():
                        break
                    continue
                if self.done_enough():
                    self.stops.begin_drain("nothing left to do", len(self.running))
                    continue
                self.restart_parked()
                self.fill_free_slots()
        finally:
            self.shutdown()
        return self.exit_code

    def boot(self) -> bool:
        """Reach AWS (riding out a network that is not up yet), clear leftovers, start
        (``Startup``). False when told to stop before AWS answered: nothing was started
        and nothing is held, so there is nothing to hand back."""
        if not self.startup():
            return False
        self.booted.set()
        return True

    @property
    def pool(self) -> Pool:
        """The pool of slots (the reaper's: it collects what the children report)."""
        return self.reaper.pool

    @property
    def receiver(self) -> Receiver:
        """The receive's thread (the intake's)."""
        return self.intake.receiver

    @property
    def refill(self) -> Refiller:
        """The refiller (the intake's: it carries out the slot decision after receives and
        reads of the waiting view)."""
        return self.intake.refill

    def done_enough(self) -> bool:
        return self.until.reached(self.dispatch.started, len(self.running), self.intake.idle)

    # -- finished jobs and health ----------------------------------------------
    def collect_finished(self, wait: float | None = None) -> None:
        """Take the outcomes the pool has for us (``Reaper``); their slots are free from now
        on. By default the wait ends with a child's result or the receive's, or when the
        intake may ask again (``Intake.may_wait``)."""
        if wait is None:
            wait = self.intake.may_wait(self.drain.is_set() or self.fast.is_set())
        self.reaper.collect(wait)

    def settle_finished(self, force: bool = False) -> None:
        """Settle every finished job that is due, each slot passing to its next owner
        (``Settler``: the order of those steps is its; a look at the queue it asks for
        before a host's last slot is promised is the intake's, ``look``)."""
        executor.run(self.settler.settle_due(self.drain.is_set, force), self.look)

    def look(self, step: Step) -> bool:
        """A settle's ``LOOK``: receive without waiting (``Intake.look``); True if the queue
        holds nothing another tenant could start, so the slot may be promised."""
        return self.intake.look(step.tenant)

    def check_health(self) -> None:
        """Stop the worker if a background thread is gone: never run unsupervised."""
        for thread in self.threads + self.intake.threads():
            if not thread.is_alive():
                logger.critical("%s thread is gone; stopping", thread.name,
                                extra=extra("thread_died", thread_name=thread.name))
                self.exit_code = Exit.THREAD_DIED
                self.fast.set()

    def check_overruns(self) -> None:
        """Kill the slot of a job whose lease was lost or that ran past its limit."""
        self.reaper.check_overruns()

    # -- new work ---------------------------------------------------------------
    def restart_parked(self) -> None:
        """Once per read of the waiting view: start parked jobs that no hand-off reached, and
        lend idle slots to capped tenants' parked jobs when borrowing is on."""
        with guard(None):
            self.intake.restart_parked(self.drain.is_set)

    def fill_free_slots(self) -> None:
        """Dispatch what the receiver brought; ask for more (one per free slot, and room
        for parking)."""
        self.intake.fill(self.drain.is_set, self.until.left)

    # -- the fixed stop order -----------------------------------------------------
    def hand_back_waiting(self) -> None:
        """Draining: what no slot here will run goes back to the queue now, not at the end.

        A drain may last the whole grace (a long job still running); parked
        messages and those a receive in flight brings would otherwise stay
        hidden from the other hosts until then. Parked ones are handed back
        once: ``give_back_parked`` forgets what it returned, so later passes
        cost no AWS call.
        """
        self.intake.give_back_received()
        returned = self.dispatch.give_back_parked()
        if returned:
            self.parked_returned += returned
            logger.info("draining: gave back %s parked message(s) for other hosts", returned,
                        extra=extra("drain_give_back_parked", count=returned))

    def shutdown(self) -> None:
        """Settle what finished, stop the pool, then threads (the rollups' last flush is its
        thread's last pass), then hand back the rest.

        Even a fast stop first reads the results already waiting in the pipes:
        a job that finished is settled, never returned to run again.
        """
        # (the fast flag is read before each wait: a second signal during the stop cuts the
        # waits still to come)
        self.collect_finished(wait=0 if self.fast.is_set() else 0.5)
        self.settle_finished(force=True)
        self.reaper.stop_pool(timeout=0 if self.fast.is_set() else 5)
        self.settle_finished(force=True)
        for thread in self.threads:
            thread.stop()
        self.intake.give_back_all(fast=self.fast.is_set())
        self.reaper.hand_back()
        self.parked_returned += self.dispatch.give_back_parked()
        logger.info("stopped (started %s job(s); %s parked message(s) given back)",
                    self.dispatch.started, self.parked_returned,
                    extra=extra("stopped", started=self.dispatch.started,
                                aws_calls=session.CALLS.snapshot()))
