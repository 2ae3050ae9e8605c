"""Exponential back-off: one formula, each caller's numbers kept."""

from __future__ import annotations

import math

from imposer.backoff import doubling
from imposer.worker import policy


class TestDoubling:
    def test_it_doubles_from_the_first_wait(self):
        """Step 0 waits the first delay, each step after twice the one before."""
        assert [doubling(0.25, step) for step in range(5)] == [0.25, 0.5, 1.0, 2.0, 4.0]

    def test_a_step_below_zero_waits_the_first_delay(self):
        """A count that starts at 1 (``failures - 1`` of a first failure) or below waits the
        first delay, never less."""
        assert doubling(3.0, -1) == doubling(3.0, 0) == 3.0

    def test_the_cap_holds(self):
        """A settlement refused five times waits 8 s, then never more than its 10 s cap."""
        assert [doubling(0.25, step, cap=10.0) for step in (5, 6, 40)] == [8.0, 10.0, 10.0]

    def test_without_a_cap_it_keeps_doubling(self):
        """A job's retry has no ceiling: the dead-letter count ends it."""
        assert doubling(30.0, 10) == 30.0 * 1024

    def test_a_step_too_large_for_a_float_waits_the_cap(self):
        """A receive failing for hours on end backs off at the cap, never raises."""
        assert doubling(0.5, 5000, cap=30.0) == 30.0
        assert doubling(0.5, 5000) == math.inf

    def test_the_callers_keep_their_numbers(self):
        """The receive's 0.5 s doubling to 30 s, the boot's 0.5 s to 10 s and a job's
        ``retry_seconds * 2^(failures - 1)``, as they were before they shared the formula."""
        assert [doubling(0.5, failures - 1, cap=30.0) for failures in range(1, 9)] == \
            [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
        assert [doubling(0.5, n, cap=10.0) for n in range(7)] == \
            [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
        assert [policy.retry_delay(30.0, failures) for failures in (0, 1, 2, 3)] == \
            [30.0, 30.0, 60.0, 120.0]
