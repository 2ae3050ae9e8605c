"""Clocks: wall time for lease expiry stored in DynamoDB, monotonic for intervals.

Code takes a clock instead of calling ``time`` so that tests move time
forward by hand and never sleep to reach an expiry.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to; both readings advance together."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._mono = 1000.0
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            self._mono += seconds


class Clock(Protocol):
    """What code that needs the time takes: both readings, so tests can move them."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...
