"""Stop requests: the first SIGTERM (or SIGINT) drains, a second one stops fast.

The handlers only set Events; the parent's loop reads them (gunicorn's
arbiter, rq's ``request_force_stop``). A drain has a grace period, after
which the jobs still running are handed back.
"""

from __future__ import annotations

import logging
import signal
import threading

from imposer.clock import Clock
from imposer.logs import extra

logger = logging.getLogger(__name__)

#: Seconds the stop after the grace period may take (children stopped, leases released,
#: messages handed back). systemd's TimeoutStopSec must be the grace plus this, or systemd
#: kills a worker that is still handing back jobs (tests/deploy/test_doctor.py holds it).
STOP_MARGIN_SECONDS = 60


class StopRequests:
    """The drain and fast-stop flags, and the drain's deadline."""

    def __init__(self, grace_seconds: float, clock: Clock) -> None:
        self.grace_seconds, self.clock = grace_seconds, clock
        self.drain = threading.Event()
        self.fast = threading.Event()
        self._deadline: float | None = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        """First signal drains, the second stops fast; only flags are set here."""
        if self.drain.is_set():
            self.fast.set()
        else:
            self.drain.set()

    def handle(self, running: int) -> None:
        """Start the drain's clock once a signal asked for it."""
        if self.drain.is_set() and self._deadline is None:
            self.begin_drain("signal", running)

    def begin_drain(self, why: str, running: int) -> None:
        self.drain.set()
        if self._deadline is None:
            self._deadline = self.clock.monotonic() + self.grace_seconds
            logger.info("draining (%s): %s job(s) running, grace %ss", why, running,
                        self.grace_seconds, extra=extra("drain", why=why))

    def grace_over(self) -> bool:
        return self._deadline is not None and self.clock.monotonic() > self._deadline
