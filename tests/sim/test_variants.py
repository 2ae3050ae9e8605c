"""Variants side by side, the smallest slot count, and rules shared with the worker."""

from __future__ import annotations

import inspect

import attrs
import pytest

from imposer.sim.engine import Policy, simulate
from imposer.sim.rules import WORKER, Rules
from imposer.sim.variants import Grid, Runner
from imposer.sim.workload import SimJob
from imposer.worker import policy as rules
from tests.sim.test_metrics import four_weeks


class TestGrid:
    def test_one_policy_per_combination(self):
        """Reserve values multiply only the borrowing rows."""
        grid = Grid(hosts=(1, 2), slots=(8, 10), borrow=(True, False), reserve=(0, 1, 2))
        policies = grid.policies()
        assert len(policies) == 2 * 2 * (3 + 1)
        assert {p.reserve for p in policies if not p.borrow} == {0}

    def test_the_base_carries_shared_settings(self):
        """Park window, deferral and tier caps come from the base policy into every row."""
        base = Policy(park_seconds=60, caps={"big": 6})
        assert {(p.park_seconds, p.caps) for p in Grid(base=base, slots=(8, 9)).policies()} \
            == {(60, (("big", 6),))}


class TestSmallestSlots:
    def test_the_rule_flips_once_at_the_answer(self):
        """The answer is not at capacity, and one slot fewer is."""
        runner = Runner(four_weeks({d: 9 for d in range(28)}))
        base = Policy(slots=8, cap=8)
        least = runner.smallest_slots(base)
        assert least is not None and least > 8
        assert not runner.at_capacity(attrs.evolve(base, slots=least))
        assert runner.at_capacity(attrs.evolve(base, slots=least - 1))

    def test_a_fleet_within_capacity_may_shrink(self):
        """Half-used slots: fewer slots still meet the rule."""
        runner = Runner(four_weeks({d: 4 for d in range(28)}))
        least = runner.smallest_slots(Policy(slots=8, cap=8))
        assert least is not None and least < 8

    def test_rows_carry_figures_and_the_answer(self):
        """One row per variant, each with its figures and its smallest slot count."""
        runner = Runner(four_weeks({d: 9 for d in range(28)}))
        rows = runner.rows(Grid(base=Policy(cap=8), slots=(8, 12)))
        assert [r.figures.policy.slots for r in rows] == [8, 12]
        assert rows[0].figures.verdict.at_capacity and not rows[1].figures.verdict.at_capacity
        assert rows[0].min_slots == rows[1].min_slots
        assert rows[0].to_dict()["min_slots"] == rows[0].min_slots


class TestSharedRules:
    """The simulator decides with the worker's own functions, so it cannot drift from them;
    a run given another rule (a ``Rules`` value, nothing patched) decides with that one."""

    WORK = [SimJob(tenant="a", arrival=0, run=10), SimJob(tenant="a", arrival=0, run=10),
            SimJob(tenant="b", arrival=1, run=30)]

    def test_the_hand_off_rule_is_the_workers(self):
        """Change the worker's hand-off rule and the simulated schedule changes with it.

        A receive takes 1 s here, so a's first job starts at 1 and ends at 11
        in the host's last free slot: the hand-off is owed and the receive
        asked for that slot (without a long poll, since one is owed) comes
        back empty and pays it at 12. A rule that hands the last slot over at
        once starts it at 11; one that never hands off leaves it to its park
        window (300, after the 1 s its first receive took).
        """
        policy = Policy(slots=2, cap=1, poll_seconds=4, receive_seconds=1.0)
        before = simulate(self.WORK, policy).first_start
        eager = simulate(self.WORK, policy, rules=attrs.evolve(
            WORKER, may_hand_off=lambda free, queue_empty=False: free >= 1)).first_start
        never = simulate(self.WORK, policy, rules=attrs.evolve(
            WORKER, may_hand_off=lambda free, queue_empty=False: False)).first_start
        assert (before[1], eager[1]) == (12, 11) and never[1] >= 300

    def test_the_cap_check_is_the_workers(self):
        """A cap rule that lets one more job in shows up as one more job at once."""
        looser = attrs.evolve(WORKER,
                              may_take_own_slot=lambda inflight, cap: cap > 0 and inflight <= cap)
        s = simulate([SimJob(tenant="a", arrival=0, run=10) for _ in range(4)],
                     Policy(slots=4, cap=1).perfect(), rules=looser)
        assert s.first_start == (0, 0, 10, 10)

    def test_retry_backoff_and_dead_lettering_are_the_workers(self):
        """The retry delay and the dead-letter test come from the rules a run is given."""
        other = attrs.evolve(WORKER, retry_delay=lambda base, failures: 1.0,
                             is_dead=lambda failures, most: failures >= 2)
        s = simulate([SimJob(tenant="a", arrival=0, run=10, fates=("retry",))],
                     Policy(retry_seconds=100, max_attempts=9), rules=other)
        assert [a.start for a in s.attempts] == [0, 11] and s.status == ("dead",)

    def test_the_default_rules_are_the_workers_functions(self):
        """Every rule a simulation decides with by default is worker.policy's own function,
        not a copy."""
        assert inspect.signature(simulate).parameters["rules"].default is WORKER
        for field in attrs.fields(Rules):
            assert getattr(WORKER, field.name) is getattr(rules, field.name), field.name

    def test_the_order_of_hand_offs_is_the_workers(self):
        """Reverse the worker's order of a tenant's parked notes and the parked jobs
        start in reverse: the simulator hands off in the order ``own_first`` gives."""
        work = [SimJob(tenant="a", arrival=i, run=10, job_id=f"j{i}") for i in range(4)]
        policy = Policy(slots=4, cap=1)
        order = [j for _, j in sorted(zip(simulate(work, policy).first_start, "0123"))]
        backwards = attrs.evolve(WORKER, own_first=lambda notes, mine, urgency=None:
                               list(reversed(notes)))
        reverse = [j for _, j in sorted(zip(simulate(work, policy, rules=backwards).first_start,
                                            "0123"))]
        assert order == ["0", "1", "2", "3"] and reverse == ["0", "3", "2", "1"]

    def test_the_receive_size_is_the_workers(self):
        """Room for parking: one free slot, cap 1, twelve jobs. Each receive asks for the
        slot and as many more as the last batch parked: 2, 2, 3, 4, then 5 of which one
        is left, then an empty poll (6). Without the room, one receive per message (12)."""
        work = [SimJob(tenant="a", arrival=0, run=10) for _ in range(12)]
        policy = Policy(slots=2, cap=1)
        roomy = simulate(work, policy).counts
        tight = simulate(work, policy, rules=attrs.evolve(
            WORKER, receive_size=lambda free, parked: min(free, 10))).counts
        assert roomy["parked"] == tight["parked"] == 11
        assert (roomy["receives"], tight["receives"]) == (6, 12)

    @pytest.mark.parametrize("name", ["may_take_own_slot", "why_not_borrow", "may_hand_off",
                                      "own_first", "oldest_first", "retry_delay", "is_dead",
                                      "receive_size"])
    def test_every_rule_is_called(self, name):
        """Each of the worker's eight rules is called by a simulation that needs it."""
        calls = []
        real = getattr(rules, name)

        def spy(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)

        work = [SimJob(tenant="a", arrival=0, run=10, fates=("retry", "succeeded"))
                for _ in range(4)] + [SimJob(tenant="b", arrival=1, run=5)]
        simulate(work, Policy(slots=4, cap=1, borrow=True, reserve=1),
                 rules=attrs.evolve(WORKER, **{name: spy}))
        assert calls
