"""The freed slot's one decision, on plain values: every case the worker's paths pin.

``allocation.decide`` is what the settler (before a release) and the refill (after one,
on an empty receive, after a batch, on a read of the waiting view) ask; the simulator
asks it too. These pin each case without AWS, a pool or a clock.
"""

from __future__ import annotations

import attrs
import pytest

from imposer.worker.allocation import (
    BatchDone,
    Kind,
    QueueEmpty,
    Read,
    Released,
    Releasing,
    Standing,
    Step,
    ViewRead,
    decide,
    in_turn,
)
from imposer.worker import executor
from imposer.models.urgency import DEFAULT_PRIORITY, sort_key

PARKED, NONE, PAUSED, FAILED = Read.PARKED, Read.NONE, Read.PAUSED, Read.FAILED


class _Parent:
    """A parent of plain values for the worker's own plan (``executor.Parent``): what the
    test's standing says, and what the plan has found since."""

    def __init__(self, standing: Standing) -> None:
        self.base, self.slots, self.owed = standing, 8, dict(standing.owed)

    def standing(self, trigger, progress: executor.Progress) -> Standing:
        return attrs.evolve(self.base, free=self.base.free - progress.started,
                            owed=dict(self.owed), reads={**self.base.reads, **progress.reads},
                            looked={**self.base.looked, **progress.looked},
                            tried=self.base.tried | progress.tried,
                            started=self.base.started + progress.started,
                            borrowers=dict(progress.borrowers))

    def borrowers(self, prefer) -> dict[str, int]:
        return dict(self.base.borrowers)


def steps(standing: Standing, trigger, outcomes=None) -> list[Step]:
    """Every step the worker's plan (``executor``: ``decide`` asked again and again) takes
    from *standing*: a READ finds *outcomes*[tenant] (PARKED by default), a LOOK finds
    the queue empty unless *outcomes* says ``look:<tenant>`` is False, a START succeeds
    unless *outcomes* says ``start:<tenant>`` is False; a release's plan ends with the
    step the release takes."""
    outcomes = outcomes or {}
    out: list[Step] = []

    def carry(step: Step):
        out.append(step)
        assert len(out) < 50, "the plan never said it was done"
        if step.kind is Kind.READ:
            return outcomes.get(step.tenant, PARKED)
        if step.kind is Kind.LOOK:
            return outcomes.get(f"look:{step.tenant}", True)
        if step.kind is Kind.START:
            return outcomes.get(f"start:{step.tenant}", True)
        return None

    if isinstance(trigger, Releasing):
        out.append(executor.run(executor.releasing(
            trigger, lambda progress: _Parent(standing).standing(trigger, progress),
            standing.borrowers), carry))
    else:
        executor.run(executor.allocate(trigger, _Parent(standing)), carry)
    return out


def kinds(found: list[Step]) -> list[tuple]:
    return [(st.kind.value, st.tenant) + (("borrow",) if st.borrow else ()) for st in found]


class TestBeforeTheRelease:
    def test_a_slot_with_another_free_is_handed_over_after_a_read(self):
        """Two free slots: acme's notes are read and its oldest parked job starts with the
        release, no look (another slot stays free for the queue)."""
        found = steps(Standing(free=2, parked=("acme",)), Releasing("acme"))
        assert kinds(found) == [("read", "acme"), ("hand over", "acme")]

    def test_the_last_slot_is_handed_over_only_after_a_look_finds_nobody(self):
        """The host's last free slot: read, then look; the queue empty of other tenants'
        work, the release hands it over."""
        found = steps(Standing(free=1, parked=("acme",)), Releasing("acme"))
        assert kinds(found) == [("read", "acme"), ("look", "acme"), ("hand over", "acme")]

    def test_a_look_that_finds_another_tenant_leaves_the_last_slot_to_it(self):
        """The look brings initech's job: the release is a plain one (acme is owed)."""
        found = steps(Standing(free=1, parked=("acme",)), Releasing("acme"),
                      {"look:acme": False})
        assert kinds(found)[-1] == ("leave", None)

    @pytest.mark.parametrize("standing", [
        Standing(free=1, parked=()),                       # not parked lately: no read
        Standing(free=0, parked=("acme",)),                # no slot at all
        Standing(free=3, parked=("acme",), stopping=True),  # stopping
    ], ids=["not-parked-lately", "none-free", "stopping"])
    def test_no_promise_costs_nothing(self, standing):
        """Where no promise may be made, the release is a plain one with no read."""
        assert kinds(steps(standing, Releasing("acme"))) == [("leave", None)]

    @pytest.mark.parametrize("read, last", [(NONE, "nothing parked"), (PAUSED, "leave"),
                                            (FAILED, "leave")])
    def test_what_the_read_found_decides(self, read, last):
        """No note left: nothing follows the release; paused or a failed read: a plain
        release, decided again after it."""
        found = steps(Standing(free=2, parked=("acme",)), Releasing("acme"), {"acme": read})
        assert kinds(found)[-1][0] == last

    def test_a_read_that_finds_none_is_final_though_it_forgets_the_tenant(self):
        """The host's last slot: the read finds nothing parked and drops acme from the
        tenants parked lately; nothing follows the release (no owed hand-off)."""
        standing = Standing(free=1, parked=(), reads={"acme": NONE})
        assert kinds(steps(standing, Releasing("acme"))) == [("nothing parked", "acme")]

    def test_fair_share_leaves_the_slot_to_the_tenant_further_below(self):
        """Fair share: acme, far above its share, yields; the release is a plain one."""
        found = steps(Standing(free=2, parked=("acme",), sharing=True, yields_to="globex"),
                      Releasing("acme"))
        assert kinds(found) == [("read", "acme"), ("leave", None)]


class TestABorrowedSlot:
    def test_a_borrowed_slot_goes_with_its_release_to_the_borrower_with_fewest(self):
        """A borrowed job ends: the borrow rule's first turn (fewest borrowed) has its parked
        job started by the release, in a borrowed lease."""
        standing = Standing(free=3, borrow=True, reserve=1, borrowers={"acme": 2, "initech": 0})
        found = steps(standing, Releasing("acme", borrowed=True))
        assert kinds(found) == [("read", "initech"), ("hand over", "initech", "borrow")]

    def test_a_turn_with_nothing_parked_passes_to_the_next(self):
        """initech has nothing parked: the next turn, acme's, is read and handed over."""
        standing = Standing(free=3, borrow=True, reserve=1, borrowers={"acme": 0, "initech": 0})
        found = steps(standing, Releasing("acme", borrowed=True), {"acme": NONE})
        assert kinds(found) == [("read", "acme"), ("read", "initech"),
                                ("hand over", "initech", "borrow")]

    def test_the_reserve_is_never_lent_with_a_release(self):
        """Only the reserve would be left: no turn, a plain release; every turn read empty:
        nothing parked."""
        assert kinds(steps(Standing(free=1, borrow=True, reserve=1, borrowers={"acme": 0}),
                           Releasing("acme", borrowed=True))) == [("leave", None)]
        found = steps(Standing(free=3, borrow=True, borrowers={"acme": 0}),
                      Releasing("acme", borrowed=True), {"acme": NONE})
        assert kinds(found)[-1] == ("nothing parked", None)

    def test_nobody_borrows_while_a_tenant_below_its_cap_waits(self):
        """A blocker waits: no turn, the release is a plain one."""
        standing = Standing(free=4, borrow=True, borrowers={"acme": 0},
                            blockers=frozenset({"globex"}))
        assert kinds(steps(standing, Releasing("acme", borrowed=True))) == [("leave", None)]


class TestAfterTheRelease:
    def test_the_slot_goes_to_the_tenants_parked_job_while_another_stays_free(self):
        """Two free: one start for the tenant, one only (one settled job, one slot)."""
        found = steps(Standing(free=2), Released("acme"))
        assert kinds(found) == [("start", "acme")]

    def test_the_last_slot_is_owed(self):
        """The host's last slot: the hand-off is owed, paid by the next empty receive."""
        assert kinds(steps(Standing(free=1), Released("acme"))) == [("owe", "acme")]

    def test_fair_share_gives_the_slot_to_its_choice(self):
        """Fair share: the slot goes to the chosen tenant; nobody chosen, to the queue."""
        assert kinds(steps(Standing(free=2, sharing=True, choice="globex"),
                           Released("acme"))) == [("start", "globex")]
        assert steps(Standing(free=2, sharing=True, choice=None), Released("acme")) == []

    def test_a_borrowed_jobs_slot_is_lent_again_first_to_its_tenant(self):
        """A borrowed job's slot: lent under the borrow rule (acme first among equals)."""
        standing = Standing(free=3, borrow=True, borrowers={"acme": 0, "zeta": 0})
        assert kinds(steps(standing, Released("acme", borrowed=True))) == [
            ("start", "acme", "borrow"), ("start", "zeta", "borrow")]

    def test_nothing_starts_when_stopping(self):
        """A drain starts nothing."""
        assert steps(Standing(free=4, stopping=True), Released("acme")) == []


class TestAnEmptyReceive:
    def test_the_hand_offs_owed_are_paid_oldest_first_even_the_last_slot(self):
        """Nothing waits in the queue: owed hand-offs take the free slots, the last too."""
        found = steps(Standing(free=2, owed={"acme": 1, "globex": 2}), QueueEmpty())
        assert kinds(found) == [("start", "acme"), ("start", "globex")]

    def test_an_owed_tenant_with_nothing_to_start_is_dropped(self):
        """acme's hand-off finds nothing: its debt goes, globex's is paid."""
        found = steps(Standing(free=1, owed={"acme": 2, "globex": 1}), QueueEmpty(),
                      {"start:acme": False})
        assert kinds(found) == [("start", "acme"), ("start", "globex")]

    def test_with_no_slot_free_the_debt_stays(self):
        """No free slot: nothing paid, nothing forgiven."""
        assert steps(Standing(free=0, owed={"acme": 1}), QueueEmpty()) == []

    def test_then_idle_slots_beyond_the_reserve_are_lent(self):
        """After the debts, capped tenants borrow what is left beyond the reserve, the one
        borrowing fewest first."""
        found = steps(Standing(free=4, owed={"acme": 1}, borrow=True,
                               borrowers={"acme": 0, "zeta": 1}), QueueEmpty())
        assert kinds(found) == [("start", "acme"), ("start", "acme", "borrow"),
                                ("start", "acme", "borrow")]


class TestExpress:
    def test_an_express_tenants_borrowed_turn_takes_the_reserve(self):
        """With only the reserve left, an express borrower's parked job still takes it,
        with a release or on an empty receive; a plain borrower's does not."""
        plain = Standing(free=1, borrow=True, reserve=1, borrowers={"acme": 0})
        express = attrs.evolve(plain, express=frozenset({"acme"}))
        assert kinds(steps(plain, Releasing("acme", borrowed=True))) == [("leave", None)]
        assert kinds(steps(express, Releasing("acme", borrowed=True))) == [
            ("read", "acme"), ("hand over", "acme", "borrow")]
        assert steps(plain, QueueEmpty()) == []
        assert kinds(steps(express, QueueEmpty())) == [("start", "acme", "borrow")]

    def test_express_waits_for_a_tenant_below_its_cap(self):
        standing = Standing(free=1, borrow=True, borrowers={"acme": 0},
                            express=frozenset({"acme"}), blockers=frozenset({"globex"}))
        assert steps(standing, QueueEmpty()) == []


class TestAfterABatch:
    def test_fair_share_fills_free_slots_with_its_choice(self):
        """Fair share: each free slot to the chosen tenant's parked work."""
        assert kinds(steps(Standing(free=2, sharing=True, choice="globex"), BatchDone())) == [
            ("start", "globex"), ("start", "globex")]

    def test_without_fair_share_a_batch_leaves_slots_to_the_queue(self):
        """Caps alone: nothing to fill after a batch."""
        assert steps(Standing(free=2), BatchDone()) == []


class TestARestartOfParkedJobs:
    def test_parked_jobs_no_hand_off_reached_start_while_another_slot_stays_free(self):
        """acme below its cap with queued work: its parked jobs start until one slot is
        left, which the queue keeps (the last receive was not empty)."""
        found = steps(Standing(free=3, below_cap=("acme",)), ViewRead(queue_empty=False))
        assert kinds(found) == [("start", "acme"), ("start", "acme")]

    def test_the_last_slot_needs_an_empty_receive_and_a_look(self):
        """The last receive found the queue empty: a look now, and only if it finds nobody
        the last slot goes to the parked job."""
        standing = Standing(free=1, below_cap=("acme",))
        assert kinds(steps(standing, ViewRead(queue_empty=True))) == [
            ("look", "acme"), ("start", "acme")]

    def test_a_tenant_that_sent_since_keeps_the_last_slot(self):
        """The look finds initech's message (sent since the empty receive): acme's parked
        job stays parked, the slot is the queue's."""
        found = steps(Standing(free=1, below_cap=("acme",)), ViewRead(queue_empty=True),
                      {"look:acme": False})
        assert kinds(found) == [("look", "acme")]

    def test_a_tenant_known_at_its_cap_is_not_redriven(self):
        """The cap memo says acme is at its cap: no start tried."""
        standing = Standing(free=3, below_cap=("acme",), capped=frozenset({"acme"}))
        assert steps(standing, ViewRead()) == []

    def test_then_idle_slots_are_lent(self):
        """After the restart of parked jobs, borrowing lends what is left beyond the reserve."""
        standing = Standing(free=3, below_cap=("acme",), borrow=True, borrowers={"zeta": 0})
        assert kinds(steps(standing, ViewRead(), {"start:acme": False})) == [
            ("start", "acme"), ("start", "zeta", "borrow"), ("start", "zeta", "borrow")]


class TestTriggers:
    def test_something_else_is_refused(self):
        """A value that is no trigger raises, naming it."""
        with pytest.raises(TypeError, match="not a trigger"):
            decide(Standing(free=1), "release")


def job(name: str, age: float, priority: int = DEFAULT_PRIORITY, due: float | None = None,
        host: str = "here") -> dict:
    return {"name": name, "age": age, "priority": priority, "due": due, "host": host}


def turn(jobs: list[dict]) -> list[str]:
    """The names of *jobs* in the order a slot the decision gave their tenant takes them."""
    ordered = sorted(jobs, key=lambda j: j["age"])  # (a read returns them oldest first)
    return [j["name"] for j in in_turn(ordered, lambda j: j["host"] == "here",
                                       lambda j: sort_key(j["priority"], j["due"]))]


def fleet(notes: dict[str, list[dict]], releases: list[tuple[str, bool]]) -> dict:
    """A host of plain values: each release of (tenant, borrowed) asks the decision with
    the tenants' notes as it finds them, and the step's tenant takes its first job in turn.
    Returns tenant -> the names it started, in order."""
    left = {t: list(n) for t, n in notes.items()}
    started: dict[str, list[str]] = {t: [] for t in notes}
    borrowed = dict.fromkeys(notes, 0)
    for tenant, lent in releases:
        standing = Standing(free=3, parked=tuple(notes), borrow=True, reserve=1,
                            borrowers={t: borrowed[t] for t in notes} if lent else {})
        found = steps(standing, Releasing(tenant, borrowed=lent),
                      {t: PARKED if left[t] else NONE for t in notes})
        last = found[-1]
        if last.kind is Kind.HAND_OVER:
            name = turn(left[last.tenant])[0]
            left[last.tenant] = [j for j in left[last.tenant] if j["name"] != name]
            started[last.tenant].append(name)
            borrowed[last.tenant] += last.borrow
    return started


class TestUrgency:
    def test_a_tenants_slot_goes_to_its_most_urgent_job(self):
        """Priority first, then the earliest due time (none: after every due), then age;
        this host's own note first only among equally urgent ones."""
        jobs = [job("old", 1), job("due-late", 2, due=500.0), job("rush", 3, priority=0),
                job("due-soon", 4, due=100.0), job("low", 0, priority=9),
                job("theirs-old", 0.5, host="other"), job("rush-later", 5, priority=0)]
        assert turn(jobs) == ["rush", "rush-later", "due-soon", "due-late", "old",
                              "theirs-old", "low"]

    def test_without_urgency_the_order_is_own_oldest_then_others_newest(self):
        """Every job at the default priority with no due time: the order before priorities."""
        jobs = [job("a1", 1), job("b1", 2, host="other"), job("a2", 3),
                job("b2", 4, host="other")]
        assert turn(jobs) == ["a1", "a2", "b2", "b1"]

    def test_a_hand_over_a_start_and_a_borrowed_turn_all_take_the_most_urgent(self):
        """Whatever step gives acme the slot, the job it starts is its rush job."""
        jobs = [job("bulk-1", 1), job("bulk-2", 2), job("rush", 3, priority=1)]
        ways = [steps(Standing(free=2), Releasing("acme"))[-1],
                steps(Standing(free=2), Released("acme"))[-1],
                steps(Standing(free=3, borrow=True, borrowers={"acme": 0}),
                      Releasing("acme", borrowed=True))[-1]]
        assert [(w.kind, w.tenant) for w in ways] == [
            (Kind.HAND_OVER, "acme"), (Kind.START, "acme"), (Kind.HAND_OVER, "acme")]
        assert turn(jobs)[0] == "rush"

    def test_marking_everything_urgent_wins_a_tenant_no_slot(self):
        """The same releases, own and borrowed, with acme's jobs all at priority 0 and due
        at once: each tenant starts as many jobs, in the same turns, as with the default
        (the decision names tenants from counts; urgency orders only acme's own)."""
        releases = [("acme", False), ("globex", False), ("acme", True), ("globex", True),
                    ("acme", True), ("acme", False), ("globex", False), ("acme", True)]
        plain = {"acme": [job(f"a{i}", i) for i in range(6)],
                 "globex": [job(f"g{i}", i + 0.5) for i in range(6)]}
        urgent = {**plain, "acme": [job(f"a{i}", i, priority=0, due=1.0) for i in range(6)]}
        base, marked = fleet(plain, releases), fleet(urgent, releases)
        assert {t: len(n) for t, n in marked.items()} == {t: len(n) for t, n in base.items()}
        assert marked == base and len(base["globex"]) >= 3

