"""Background threads of the parent that never die silently."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from imposer.errors import BackendError
from imposer.logs import extra

logger = logging.getLogger(__name__)


class Periodic(threading.Thread):
    """Call *fn* every *interval* seconds until stopped; log, never die, on errors.

    The supervisor checks ``is_alive()`` of every one of these and stops the
    worker if one is gone, rather than run unsupervised.
    """

    def __init__(self, name: str, interval: float, fn: Callable[[], object],
                 stop: threading.Event | None = None, last_pass: bool = False) -> None:
        super().__init__(name=name, daemon=True)
        self.interval = interval
        self.fn = fn
        self.stop_event = stop or threading.Event()
        #: Run one pass more at the stop (the rollups: what the last interval gathered
        #: is written, not lost with the process).
        self.last_pass = last_pass

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            self._pass()

    def _pass(self) -> None:
        try:
            self.fn()
        except BackendError as exc:  # AWS had a bad moment: one warning, as everywhere
            logger.warning("AWS error in the %s pass: %s; will retry in %ss", self.name, exc,
                           self.interval, extra=extra("aws_error", thread_name=self.name))
        except Exception:
            logger.exception("%s pass failed; will retry in %ss", self.name, self.interval,
                              extra=extra(f"{self.name}_error"))

    def stop(self, timeout: float = 10.0) -> None:
        """End the passes (waiting up to *timeout* for one under way); with ``last_pass``,
        run one more here once the thread is done (never beside a pass of its own)."""
        self.stop_event.set()
        if self.is_alive():
            self.join(timeout)
        if self.last_pass and not self.is_alive():
            self._pass()
