"""The dispatch policy's pure rules (the simulator calls the same functions)."""

from __future__ import annotations

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
