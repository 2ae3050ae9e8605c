"""The cap memo on plain values: a tenant found at its cap costs no transaction for a
moment, and a release here forgets it (``imposer.worker.dispatch.capmemo``)."""

from __future__ import annotations

from imposer.clock import ManualClock
from imposer.worker import policy
from imposer.worker.dispatch.capmemo import CapMemo


class TestCapMemo:
    def test_a_tenant_found_at_its_cap_is_known_there_for_the_memo_seconds(self):
        clock = ManualClock()
        memo = CapMemo(defer_seconds=30, clock=clock)
        memo.found("acme", 4)
        assert (memo.cap("acme"), memo.cap("globex")) == (4, None)
        clock.advance(policy.CAP_MEMO_SECONDS - 0.01)
        assert memo.cap("acme") == 4
        clock.advance(0.02)
        assert memo.cap("acme") is None, "past the memo it takes a transaction again"

    def test_a_short_deferral_shortens_the_memo(self):
        """With a 0.2 s deferral a capped tenant is asked again after 0.2 s, not 1 s."""
        clock = ManualClock()
        memo = CapMemo(defer_seconds=0.2, clock=clock)
        memo.found("acme", 2)
        clock.advance(0.19)
        assert memo.cap("acme") == 2
        clock.advance(0.02)
        assert memo.cap("acme") is None

    def test_a_freed_slot_forgets_the_tenant(self):
        clock = ManualClock()
        memo = CapMemo(defer_seconds=30, clock=clock)
        memo.found("acme", 4)
        memo.found("globex", 1)
        memo.freed("acme")
        memo.freed("initech")  # never found: nothing to forget
        assert (memo.cap("acme"), memo.cap("globex")) == (None, 1)

    def test_found_again_renews_the_memo_and_its_cap(self):
        clock = ManualClock()
        memo = CapMemo(defer_seconds=30, clock=clock)
        memo.found("acme", 4)
        clock.advance(0.8)
        memo.found("acme", 6)  # a tier change read by the later acquire
        clock.advance(0.8)
        assert memo.cap("acme") == 6
