"""The dispatch policy's pure rules (the simulator calls the same functions)."""

from __future__ import annotations

import pytest

from imposer.worker import policy


class TestReceiveSize:
    def test_one_message_per_free_slot_when_nothing_was_parked(self):
        assert [policy.receive_size(free, 0) for free in (0, 1, 4, 12)] == [0, 1, 4, 10]

    def test_room_for_as_many_as_the_last_batch_parked(self):
        """A host whose one free slot is its reserve parks a backlog ten at a time."""
        assert policy.receive_size(1, 1) == 2
        assert policy.receive_size(1, 9) == 10
        assert policy.receive_size(3, 30) == policy.RECEIVE_MAX

    def test_no_receive_without_a_free_slot(self):
        """Room for parking never makes a receive on its own: a full host asks nothing."""
        assert policy.receive_size(0, 10) == 0


class TestOwnFirst:
    def test_own_oldest_first_then_the_others_newest_first(self):
        """The owner works up from its oldest note, a thief back from the newest read."""
        notes = ["a1", "b1", "a2", "b2", "a3", "b3"]
        mine = lambda note: note.startswith("a")  # noqa: E731
        assert policy.own_first(notes, mine) == ["a1", "a2", "a3", "b3", "b2", "b1"]

    def test_a_host_with_no_notes_of_its_own_steals_from_the_far_end(self):
        assert policy.own_first(["b1", "b2", "b3"], lambda note: False) == ["b3", "b2", "b1"]

    def test_urgency_outranks_whose_note_it_is(self):
        """A more urgent note of another host comes before this host's own; equals keep the
        owner-first, thief-from-the-far-end order."""
        notes = ["0a1", "0b1", "5a2", "5b2", "5b3"]  # urgency class, host, age
        mine = lambda note: note[1] == "a"  # noqa: E731
        got = policy.own_first(notes, mine, urgency=lambda note: note[0])
        assert got == ["0a1", "0b1", "5a2", "5b3", "5b2"]


class TestBorrowTurns:
    def test_idle_slots_beyond_the_reserve_go_to_parked_work(self):
        """Five free slots with one in reserve: four turns, all to the one capped tenant."""
        assert policy.borrow_turns(True, 5, 1, {"a": 0}, ()) == ["a"] * 4

    def test_two_capped_tenants_share_the_idle_slots(self):
        """The tenant borrowing fewest goes first, so neither takes every slot."""
        assert policy.borrow_turns(True, 5, 0, {"a": 2, "b": 0}, ()) == ["b", "b", "a", "b", "a"]

    def test_no_turn_while_a_tenant_below_its_cap_waits(self):
        """A blocker other than the borrower stops every turn; the reserve is never lent."""
        assert policy.borrow_turns(True, 5, 1, {"a": 0}, ["c"]) == []
        assert policy.borrow_turns(True, 1, 1, {"a": 0}, ()) == []
        assert policy.borrow_turns(False, 5, 1, {"a": 0}, ()) == []

    def test_an_express_tenant_may_take_the_reserve(self):
        """Express (a fleet-wide class): its parked work borrows the reserve slot too; the
        others still leave it free, and turns still go fewest-borrowed first."""
        assert policy.borrow_turns(True, 5, 1, {"a": 0}, (), express={"a"}) == ["a"] * 5
        assert policy.borrow_turns(True, 5, 1, {"a": 0, "x": 0}, (), express={"x"}) == [
            "a", "x", "a", "x", "x"]
        assert policy.borrow_turns(True, 1, 1, {"a": 0}, (), express={"x"}) == []
        assert policy.why_not_borrow(True, 1, 1, "x", (), express={"x"}) is None
        assert policy.why_not_borrow(True, 1, 1, "a", (), express={"x"}) == \
            "only 1 slot(s) free; 1 kept in reserve"

    def test_express_never_borrows_past_a_waiting_tenant_below_its_cap(self):
        """The class crosses the reserve, not the rule that a tenant below its cap with
        work waiting goes first, nor borrowing being off."""
        assert policy.borrow_turns(True, 5, 1, {"x": 0}, ["c"], express={"x"}) == []
        assert policy.why_not_borrow(True, 3, 1, "x", ["c"], express={"x"}) == \
            "tenants below their cap are waiting: c"
        assert policy.borrow_turns(False, 5, 1, {"x": 0}, (), express={"x"}) == []


def share(tenant, **kw):
    kw.setdefault("cap", 4)
    return policy.TenantShare(tenant=tenant, **kw)


class TestDecay:
    def test_usage_halves_every_half_life(self):
        """Slurm's PriorityDecayHalfLife: 2^(-elapsed/half-life) of the usage is left."""
        assert policy.decayed(80.0, 60.0, 60.0) == 40.0
        assert policy.decayed(80.0, 180.0, 60.0) == 10.0

    def test_a_half_life_of_zero_decays_nothing(self):
        """0 turns fair share off: usage is what it was, however long ago."""
        assert policy.decayed(80.0, 1e9, 0.0) == 80.0

    def test_forward_decayed_charges_read_back_as_decayed_ones(self):
        """A charge scaled up to its era's base and read at now equals the charge decayed
        from its end to now, charges of two eras summed."""
        half, span = 60.0, policy.ERA_HALF_LIVES * 60.0
        terms = {}
        for seconds, at in ((10.0, span - 30.0), (4.0, span + 90.0)):  # across an era change
            terms = policy.fold(terms, *policy.forward_charge(seconds, at, half))
        now = span + 150.0
        expected = policy.decayed(10.0, now - (span - 30.0), half) + \
            policy.decayed(4.0, now - (span + 90.0), half)
        assert policy.usage_at(terms, now, half) == pytest.approx(expected, rel=1e-12)
        assert sorted(terms) == [0, 1]

    def test_fold_forgets_eras_older_than_the_previous_one(self):
        """Two eras back, a charge has decayed by 2^-64 at least: its term is dropped."""
        assert policy.fold({3: 1.0, 4: 2.0}, 5, 1.0) == {4: 2.0, 5: 1.0}

    def test_the_charge_scale_stays_within_a_dynamodb_number(self):
        """A charge at the end of an era is scaled by under 2^64 of its seconds."""
        era, amount = policy.forward_charge(1.0, 1e9 - 1e-3, 600.0)
        assert amount < 2.0 ** policy.ERA_HALF_LIVES
        assert era == policy.era_of(1e9 - 1e-3, 600.0)


class TestRunningUsage:
    def test_a_running_job_counts_its_time_so_far_or_its_tenants_typical_run(self):
        """Started 10 s and 1 s ago, with a typical run of 4 s: 10 + 4; with none known,
        their time so far (11)."""
        assert policy.running_usage([90.0, 99.0], 100.0, 4.0) == 14.0
        assert policy.running_usage([90.0, 99.0], 100.0) == 11.0
        assert policy.running_usage([], 100.0, 4.0) == 0.0

    def test_the_typical_run_moves_by_a_weight_toward_each_run(self):
        """The first run is the typical one; each next moves it 30% of the way."""
        assert policy.typical_run(None, 8.0) == 8.0
        assert policy.typical_run(10.0, 20.0) == pytest.approx(13.0)
        typical = None
        for _ in range(30):
            typical = policy.typical_run(typical, 2.0 if typical is None else 50.0)
        assert typical == pytest.approx(50.0, rel=1e-3)


class TestWeightedShares:
    def test_equal_weights_split_equally(self):
        """Three tenants of weight 1 and room under their caps: a third each."""
        shares = policy.weighted_shares([share("a", cap=8), share("b", cap=8),
                                         share("c", cap=8)], 8)
        assert shares == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})

    def test_a_cap_bounds_a_share_and_the_rest_goes_by_weight(self):
        """Weights 3:1:1 with caps of 4 of 8 slots: the heavy weight gets its cap's half,
        the other two share the rest equally."""
        shares = policy.weighted_shares([share("a", weight=3), share("b"), share("c")], 8)
        assert shares == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.25})

    def test_weights_divide_the_share_when_no_cap_binds(self):
        """Weights 2:1:1 under caps that do not bind: a half, a quarter, a quarter."""
        shares = policy.weighted_shares([share("a", weight=2, cap=8), share("b", cap=8),
                                         share("c", cap=8)], 8)
        assert shares == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.25})

    def test_weight_zero_and_cap_zero_have_no_share(self):
        """A paused tenant (weight 0 or cap 0) gets nothing; the others share it all."""
        shares = policy.weighted_shares([share("a", weight=0), share("b", cap=0),
                                         share("c", cap=8)], 8)
        assert shares == {"a": 0.0, "b": 0.0, "c": 1.0}


class TestNextTenant:
    def test_the_tenant_furthest_below_its_share_goes_first(self):
        """Usage over share ranks the waiting tenants: the least used for its share first."""
        tenants = [share("a", usage=90.0), share("b", usage=10.0), share("c", usage=50.0)]
        assert policy.share_order(tenants, 8) == ["b", "c", "a"]
        assert policy.next_tenant(tenants, 8) == "b"

    def test_usage_is_weighed_by_share(self):
        """Weight 3 against 1: 60 licence-seconds of a are less for its share than 30 of b."""
        tenants = [share("a", weight=3, cap=8, usage=60.0), share("b", cap=8, usage=30.0)]
        assert policy.next_tenant(tenants, 8) == "a"

    def test_ties_go_to_the_fewest_slots_held_then_by_name(self):
        """Nobody has used anything yet: fewest slots held for its share, then the name."""
        tenants = [share("c"), share("a", inflight=1), share("b")]
        assert policy.share_order(tenants, 8) == ["b", "c", "a"]
        assert policy.share_order(list(reversed(tenants)), 8) == ["b", "c", "a"]

    def test_a_tenant_above_its_share_is_held_below_its_cap_while_others_wait(self):
        """a holds 2 of its cap of 4 but used far more: the slot goes to b."""
        tenants = [share("a", inflight=2, usage=500.0), share("b", inflight=3, usage=20.0)]
        assert policy.next_tenant(tenants, 8) == "b"

    def test_never_above_the_cap(self):
        """The least used tenant at its cap is passed over for the next."""
        tenants = [share("a", inflight=4, usage=0.0), share("b", usage=900.0)]
        assert policy.next_tenant(tenants, 8) == "b"

    def test_weight_zero_pauses_a_tenant(self):
        """Weight 0 never gets a slot, however little it used; alone, nobody gets it."""
        assert policy.next_tenant([share("a", weight=0), share("b", usage=99.0)], 8) == "b"
        assert policy.next_tenant([share("a", weight=0)], 8) is None

    def test_a_tenant_alone_gets_everything_its_cap_allows(self):
        """One tenant waiting takes every slot up to its cap, however much it used."""
        alone = [share("a", usage=1e6, inflight=n) for n in range(4)]
        assert [policy.next_tenant([t], 8) for t in alone] == ["a"] * 4
        assert policy.next_tenant([share("a", usage=1e6, inflight=4)], 8) is None

    def test_a_tenant_with_nothing_waiting_only_counts_towards_the_shares(self):
        """A running tenant with no work waiting is never chosen but shrinks others' share."""
        tenants = [share("a", waiting=False), share("b", usage=5.0)]
        assert policy.next_tenant(tenants, 8) == "b"
        assert policy.weighted_shares(tenants, 8) == {"a": 0.5, "b": 0.5}

    def test_share_gaps_are_usage_fractions_minus_shares(self):
        """a used three quarters with a half share: +0.25; b -0.25."""
        gaps = policy.share_gaps([share("a", usage=75.0), share("b", usage=25.0)], 8)
        assert gaps == pytest.approx({"a": 0.25, "b": -0.25})


class TestYieldsTo:
    def test_a_tenant_far_above_its_share_yields_to_the_one_furthest_below(self):
        """a used 70% with a half share; b 30%: a leaves the slot to b."""
        tenants = [share("a", usage=70.0), share("b", usage=30.0)]
        assert policy.yields_to("a", tenants, 8) == "b"
        assert policy.yields_to("b", tenants, 8) is None

    def test_within_the_slack_the_tenant_in_hand_takes_the_slot(self):
        """51% against 49% of equal shares is within the slack: no park, no second start."""
        tenants = [share("a", usage=51.0), share("b", usage=49.0)]
        assert policy.yields_to("a", tenants, 8) is None
        assert policy.yields_to("a", tenants, 8, slack=0.0) == "b"

    def test_a_tenant_that_may_not_start_yields_to_the_first(self):
        """At its cap or weight 0, a tenant yields to whoever may, and may not start alone."""
        assert policy.yields_to("a", [share("a", inflight=4), share("b", usage=9.0)], 8) == "b"
        assert not policy.may_start("a", [share("a", weight=0)], 8)
        assert not policy.may_start("a", [share("a", inflight=4)], 8)
        assert policy.may_start("a", [share("a", inflight=3, usage=1e6)], 8)

    def test_a_new_tenant_never_yields(self):
        """No usage yet is as far below its share as a tenant can be."""
        tenants = [share("a", usage=500.0, inflight=3), share("b", usage=400.0, inflight=3),
                   share("new")]
        assert policy.yields_to("new", tenants, 8) is None
        assert policy.yields_to("a", tenants, 8) == "new"
