"""The slot decision's plan, on plain values: what it keeps between steps.

``executor`` asks ``allocation.decide`` again and again for the worker's settler and
refill and for the simulator; these pin what it carries from one step to the next
(the hand-offs owed, the borrowers lent to, the reads and looks) without AWS or a
pool. ``test_allocation`` pins each case of the decision through the same plan.
"""

from __future__ import annotations

import attrs
import pytest

from imposer.worker import executor
from imposer.worker.allocation import Standing
from imposer.worker.steps import Kind, QueueEmpty, Read, Released, Releasing, Step


class Parent:
    """A parent of plain values: *free* slots, less one per start."""

    def __init__(self, free: int, *, slots: int = 8, owed=None, capped=None,
                 **standing) -> None:
        self.free, self.slots, self.owed = free, slots, dict(owed or {})
        #: Tenants at their cap with parked work (the borrow rule's candidates).
        self.capped = dict(capped or {})
        self.standing_kw = standing

    def standing(self, trigger, progress: executor.Progress) -> Standing:
        return Standing(free=self.free - progress.started, owed=dict(self.owed),
                        tried=frozenset(progress.tried), started=progress.started,
                        looked=dict(progress.looked), borrowers=dict(progress.borrowers),
                        **self.standing_kw)

    def borrowers(self, prefer):
        return dict.fromkeys(prefer, 0) | self.capped


def drive(plan, answers):
    """Run *plan*; each step's answer is ``answers(step)``; (steps, outcome)."""
    taken = []

    def carry(step):
        taken.append(step)
        return answers(step)
    return taken, executor.run(plan, carry)


class TestOwed:
    def test_a_last_slot_is_owed_and_no_more_than_the_host_has_slots(self):
        """The host's last free slot after a plain release is owed to the tenant; owed
        again and again it stays at the host's slots."""
        parent = Parent(1, slots=2, parked=("acme",))
        for _ in range(3):
            taken, started = drive(executor.allocate(Released("acme"), parent), lambda s: None)
            assert [(s.kind, s.tenant) for s in taken] == [(Kind.OWE, "acme")]
            assert started == 0
        assert parent.owed == {"acme": 2}

    def test_an_empty_receive_pays_each_owed_once_and_drops_a_tenant_with_nothing(self):
        """Owed two each, acme's first start succeeds and its second finds nothing: acme
        is owed no more; globex is paid both; three started."""
        parent = Parent(4, owed={"acme": 2, "globex": 2})
        results = {"acme": iter([True, False])}
        taken, started = drive(executor.allocate(QueueEmpty(), parent),
                               lambda s: next(results.get(s.tenant, iter([True]))))
        assert [s.tenant for s in taken] == ["acme", "acme", "globex", "globex"]
        assert started == 3
        assert parent.owed == {}


class TestLending:
    def test_idle_slots_are_lent_turn_about_counting_what_each_borrowed(self):
        """Borrowing on, 5 free with a reserve of 1: two capped tenants share the 4 idle
        slots, the plan counting each one's borrowed starts between turns."""
        parent = Parent(5, borrow=True, reserve=1,
                        capped={"acme": 0, "globex": 0})
        taken, started = drive(executor.allocate(QueueEmpty(), parent), lambda s: True)
        assert [(s.tenant, s.borrow) for s in taken] == [
            ("acme", True), ("globex", True), ("acme", True), ("globex", True)]
        assert started == 4

    def test_a_borrower_whose_start_fails_has_no_more_turns(self):
        """acme's borrowed start finds nothing and takes no slot: all 4 idle slots beyond
        the reserve go to globex."""
        parent = Parent(5, borrow=True, reserve=1,
                        capped={"acme": 0, "globex": 0})
        taken, started = drive(executor.allocate(QueueEmpty(), parent),
                               lambda s: s.tenant != "acme")
        assert [s.tenant for s in taken] == ["acme", "globex", "globex", "globex", "globex"]
        assert started == 4


class TestBeforeARelease:
    def test_the_plan_reads_looks_and_returns_the_hand_over(self):
        """The host's last slot: the plan yields a read and a look, each answer kept for
        the next question, and returns the hand-over for the release."""
        seen = []

        def standing(progress):
            seen.append((dict(progress.reads), dict(progress.looked)))
            return Standing(free=1, parked=("acme",), reads=dict(progress.reads),
                            looked=dict(progress.looked))
        answers = {Kind.READ: Read.PARKED, Kind.LOOK: True}
        taken, last = drive(executor.releasing(Releasing("acme"), standing, {}),
                            lambda s: answers[s.kind])
        assert [s.kind for s in taken] == [Kind.READ, Kind.LOOK]
        assert last == Step(Kind.HAND_OVER, "acme")
        assert seen == [({}, {}), ({"acme": Read.PARKED}, {}),
                        ({"acme": Read.PARKED}, {"acme": True})]

    def test_a_look_that_finds_other_work_leaves_the_slot_to_the_queue(self):
        """The look finds another tenant's work: the release is a plain one."""
        def standing(progress):
            return attrs.evolve(Standing(free=1, parked=("acme",)),
                                reads=dict(progress.reads), looked=dict(progress.looked))
        answers = {Kind.READ: Read.PARKED, Kind.LOOK: False}
        _, last = drive(executor.releasing(Releasing("acme"), standing, {}),
                        lambda s: answers[s.kind])
        assert last.kind is Kind.LEAVE


class TestAStepThatRaises:
    def test_the_error_is_raised_in_the_plan_at_its_step(self):
        """A carry that raises (a bug, not an AWS error) raises inside the plan where the
        step was yielded, so the plan's own guard (the settle's ``guard(job)``) sees it."""
        seen = []

        def plan():
            try:
                yield Step(Kind.LOOK, "acme")
            except RuntimeError as exc:
                seen.append(str(exc))
            return "guarded"

        def carry(step):
            raise RuntimeError("the look broke")
        assert executor.run(plan(), carry) == "guarded"
        assert seen == ["the look broke"]

    def test_an_error_the_plan_does_not_catch_reaches_the_caller(self):
        """Unguarded, the carry's error leaves ``run`` as it was raised."""
        def plan():
            yield Step(Kind.LOOK, "acme")

        def carry(step):
            raise KeyError("acme")
        with pytest.raises(KeyError):
            executor.run(plan(), carry)
