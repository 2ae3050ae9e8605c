"""The lease timing: every share of the lease TTL the parent acts on, in one place."""

from __future__ import annotations

import pytest

from imposer.settings import Settings
from imposer.worker.timing import LeaseTiming

#: The defaults' shape: a 600 s lease, a 300 s park window.
TIMING = LeaseTiming(ttl=600.0, park=300.0)


class TestLeaseTiming:
    def test_it_comes_from_the_lease_ttl_and_the_park_window(self):
        """The two settings it reads are the lease TTL and the park window, nothing else."""
        s = Settings.load({}, lease_ttl_seconds=900.0, park_seconds=450.0)
        assert LeaseTiming.from_settings(s) == LeaseTiming(ttl=900.0, park=450.0)

    def test_a_message_stays_invisible_for_a_lease_ttl(self):
        """A received or held message hides as long as a lease lasts."""
        assert TIMING.visibility == 600.0

    def test_tools_stop_a_tenth_of_the_ttl_before_the_lease_expires(self):
        """The fence margin is 60 s at the 600 s TTL (room for clock skew)."""
        assert TIMING.fence_margin == pytest.approx(60.0)
        assert LeaseTiming(ttl=5.0, park=3.0).fence_margin == pytest.approx(0.5)

    @pytest.mark.parametrize("left, renew", [(600.0, False), (400.0, False), (399.9, True),
                                             (10.0, True), (-5.0, True)])
    def test_a_lease_a_slow_acquire_aged_by_a_third_is_renewed_before_launch(self, left,
                                                                            renew):
        """A lease with less than two thirds of its TTL left is renewed before its job starts;
        one with two thirds or more is launched as it is."""
        now = 1_700_000_000.0
        assert TIMING.renew_before_launch(now + left, now) is renew

    @pytest.mark.parametrize("took, slow", [(0.0, False), (150.0, False), (150.1, True),
                                            (600.0, True)])
    def test_a_renewal_that_takes_a_quarter_of_the_ttl_is_slow(self, took, slow):
        """Warn about a renewal over 150 s at the 600 s TTL, not one of 150 s or less."""
        assert TIMING.slow_renewal(took) is slow

    def test_parked_jobs_are_remembered_for_a_park_window_or_a_ttl_if_longer(self):
        """The window is the longer of the two: a receive hides a message for a whole TTL."""
        assert TIMING.parked_window == 600.0
        assert LeaseTiming(ttl=600.0, park=900.0).parked_window == 900.0
