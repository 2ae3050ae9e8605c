"""What a worker does before it takes any work (``Startup``): find its resources, riding
out AWS, reclaim what its last run left, read the background views once, then start the
pool and the side threads.

A host often boots before its network is up, or while AWS has a bad
moment: the boot retries what may pass until a deadline, and stops cleanly
at a SIGTERM. A missing table or queue, or bad credentials, is configuration:
it ends the boot at once with its own exit code.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

from imposer import backoff
from imposer.aws.dynamodb import Dynamo
from imposer.aws.sqs import JobQueue
from imposer.clock import Clock
from imposer.errors import BackendError, ConfigError, MissingResource
from imposer.logs import extra
from imposer.settings import Settings
from imposer.worker.signals import StopRequests

if TYPE_CHECKING:
    from imposer.worker.dispatch.pool import Pool

logger = logging.getLogger(__name__)
T = TypeVar("T")


class StoppedWhileBooting(Exception):
    """A stop signal came while the boot was still waiting for AWS."""


def check_resources(queue: JobQueue, dynamo: Dynamo, s: Settings) -> None:
    """Refuse to start without the queue and every table (`imposer init` makes them)."""
    queue.url()
    for table in (s.leases_table, s.jobs_table, s.tenants_table, s.outbox_table,
                  s.rollups_table, s.waiting_table):
        if not dynamo.table_exists(table):
            raise MissingResource(f"table {table} does not exist (run `imposer init`)")


class Patience:
    """Call a boot step, retrying AWS errors that may pass until the boot deadline.

    Each step has the whole ``boot_retry_seconds``. A SIGTERM (drain or fast stop)
    ends the retries: there is nothing to drain yet, so the worker stops
    cleanly rather than wait for AWS.
    """

    def __init__(self, seconds: float, clock: Clock, drain: threading.Event,
                 fast: threading.Event) -> None:
        self.seconds, self.clock, self.drain, self.fast = seconds, clock, drain, fast

    def __call__(self, what: str, call: Callable[[], T]) -> T:
        deadline, failures = self.clock.monotonic() + self.seconds, 0
        while True:
            try:
                return call()
            except (MissingResource, ConfigError):
                raise
            except BackendError as exc:
                if self.drain.is_set() or self.fast.is_set():
                    raise StoppedWhileBooting(f"{what}: {exc}") from None
                if self.clock.monotonic() > deadline:
                    raise
                delay, failures = backoff.doubling(0.5, failures, cap=10.0), failures + 1
                logger.warning("%s: %s; retrying in %.1fs", what, exc, delay,
                               extra=extra("aws_retry", what=what))
                self.drain.wait(delay)  # (set by every stop signal, the fast one's too)


class Startup:
    """The boot, in its order: an earlier run's helpers cleared (before AWS: none may
    outlive it), AWS reached (*reach*), this host's orphaned leases reclaimed (*reclaim*,
    returning them), each background view read once (*views*: what, read), then the pool
    and the side *threads* started. Every AWS step rides out errors that may pass for
    ``boot_retry_seconds`` (``Patience``)."""

    def __init__(self, settings: Settings, *, clock: Clock, stops: StopRequests, pool: Pool,
                 threads: list[threading.Thread], reach: Callable[[], object],
                 reclaim: Callable[[], Sequence[object]],
                 views: Sequence[tuple[str, Callable[[], object]]] = ()) -> None:
        self.settings, self.clock, self.stops, self.pool = settings, clock, stops, pool
        self.threads, self.reach, self.reclaim, self.views = threads, reach, reclaim, views

    def __call__(self) -> bool:
        """Boot; False when told to stop before AWS answered: nothing was started and
        nothing is held, so there is nothing to hand back."""
        s = self.settings
        self.stops.install()
        self.pool.clear_leftovers()
        patiently = Patience(s.boot_retry_seconds, self.clock, self.stops.drain,
                             self.stops.fast)
        try:
            patiently("boot", self.reach)
            orphans = patiently("boot", self.reclaim)
            for what, read in self.views:
                patiently(what, read)
        except StoppedWhileBooting as exc:
            logger.info("stopped while booting: %s", exc,
                        extra=extra("stopped", started=0, booted=False))
            return False
        logger.info("starting %s slots on host %s (engine %s); reclaimed %s orphaned lease(s)",
                    s.slots, s.host_id, s.engine, len(orphans),
                    extra=extra("boot", host=s.host_id, slots=s.slots, reclaimed=len(orphans)))
        self.pool.start()
        for thread in self.threads:
            thread.start()
        return True
