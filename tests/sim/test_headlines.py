"""Guards of the benchmark's headline figures: each policy's targets, met by the simulator.

``scripts/bench_fairness.py`` proves the targets on real workers (17 minutes
on an idle machine); these replay the same seeded workloads with the same
settings through the simulator's engine (no wall clock, well under a second
each), so a change that turns a policy's feature off or breaks it fails here
at once. The stack's speed is fixed at what the benchmark measures on an idle
machine (a call 10 ms, a receive 40 ms). Each guard asserts the benchmark's
own target (``headline.TARGETS``); the margin is the distance between the
simulated figure and the target, stated beside each (a noise-free replay sits
well inside the target, so a lost feature, not noise, is what trips it).
"""

from __future__ import annotations

import functools

import attrs
import pytest

from imposer.sim import fairness
from imposer.sim.engine import simulate
from imposer.sim.rules import WORKER
from imposer.sim.headline import (
    CALLS_PER_JOB,
    TARGETS,
    WORKLOADS,
    judge,
    measure,
    path_calls,
    policy_of,
    rows_of_schedule,
)
from imposer.sim.workload import synthetic
from imposer.worker.policy import running_usage

#: The stack's speed on an idle machine (docs/benchmarks.rst: a call 7-13 ms, a receive
#: 26-43 ms).
LATENCY = {"call": 0.010, "receive": 0.040}
#: What each target's simulated figure is at the time of writing: the margin to the target.
SIMULATED = {
    "lone heavy tenant, cap, 1 host: makespan": 1.02,
    "lone heavy tenant, cap, 2 hosts: makespan": 1.04,
    "mixed, cap: quiet p95 wait": 0.85,
    "mixed, cap, 2 hosts: quiet p95 wait": 0.65,
    "lone heavy tenant, borrow, 1 host: makespan": 1.02,
    "lone heavy tenant, borrow, 2 hosts: makespan": 1.04,
    "mixed, borrow: utilisation": 0.87,
    "mixed, borrow: quiet p95 wait": 0.89,
    "long, borrow: utilisation": 0.90,
    "long, borrow: quiet p95 wait": 0.68,
    "lone heavy tenant: makespan borrow/cap": 0.59,  # (4/7 = 0.57 at best)
}


@functools.lru_cache(maxsize=None)
def run(name: str, policy: str, perfect: bool = False):
    """The benchmark run *name* (``lone``, ``mixed-2h``, ...) under *policy*, simulated."""
    workload = name.split("-")[0]
    hosts = 2 if name.endswith("-2h") else 1
    spec, median, seed = WORKLOADS[workload]
    p = policy_of(policy, hosts, 8 // hosts, LATENCY)
    return simulate(synthetic(spec, median=median, seed=seed), p.perfect() if perfect else p)


def figures(name: str, policy: str, perfect: bool = False) -> dict:
    return measure(rows_of_schedule(run(name, policy, perfect)), 8)


class TestHeadlineTargets:
    @pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.what)
    def test_the_simulated_run_meets_the_target(self, target):
        """Each of the benchmark's targets holds for its run replayed by the simulator."""
        reference = figures(*target.against) if target.against else \
            figures(*target.run, perfect=True)
        value, met = judge(target, figures(*target.run), reference)
        assert met, (f"{target.what}: {value:.3f} against the target {target.bound} "
                     f"(it was {SIMULATED[target.what]})")

    def test_every_target_has_its_figure_stated(self):
        """The margin of each guard is written down beside it."""
        assert set(SIMULATED) == {t.what for t in TARGETS}


class TestCallsPerJob:
    @pytest.mark.parametrize("name", ["lone", "mixed", "long", "lone-2h", "mixed-2h"])
    @pytest.mark.parametrize("policy", ["cap", "borrow"])
    def test_a_job_costs_at_most_four_calls_on_its_path(self, name, policy):
        """Receive, transactions, visibility and the waiting table: at most 4 calls per job
        under the cap and with borrowing (simulated 2.5-3.8 at the time of writing)."""
        assert path_calls(run(name, policy)) <= CALLS_PER_JOB

    @pytest.mark.parametrize("name", ["lone", "long"])
    def test_borrowing_costs_no_more_calls_per_job_than_the_cap(self, name):
        """A borrowed job's start rides on the release that freed its slot, as an own
        slot's hand-over does, so a heavy tenant's jobs cost no more calls each with
        borrowing than under the cap alone (simulated lone 2.52 vs 2.74, long 3.09 vs
        3.26; with a transaction of its own per borrowed start 2.92 and 3.39)."""
        assert path_calls(run(name, "borrow")) <= path_calls(run(name, "cap"))

@functools.lru_cache(maxsize=None)
def shared(workload: str, weighting: str = "equal", policy: str = "cap", hosts: int = 1,
           half_life: float = fairness.HALF_LIFE, perfect: bool = False):
    """A fair-share workload (or a headline one) under *policy* with fair share on,
    simulated; ``half_life=0`` is the count caps alone."""
    spec, median, seed = {**WORKLOADS, **fairness.WORKLOADS}[workload]
    p = fairness.share_policy(policy, hosts, 8 // hosts, LATENCY,
                              fairness.WEIGHTS[weighting], half_life)
    return simulate(synthetic(spec, median=median, seed=seed), p.perfect() if perfect else p)


#: The backlogged runs of issue 30: (workload, weighting, hosts); c's jobs are the long
#: ones in ``share``, a's in ``share-long-a``; 3:1:1 weighs a 3.
SHARE_RUNS = [("share", "equal", 1), ("share", "3:1:1", 1), ("share-long-a", "equal", 1),
              ("share-long-a", "3:1:1", 1), ("share", "equal", 2)]
#: The simulated figures at the time of writing (worst miss of a weighted share, Jain).
SHARE_SIMULATED = {
    ("share", "equal", 1): (0.015, 1.000), ("share", "3:1:1", 1): (0.060, 0.998),
    ("share-long-a", "equal", 1): (0.016, 1.000), ("share-long-a", "3:1:1", 1): (0.050, 0.999),
    ("share", "equal", 2): (0.004, 1.000),
}
#: Draws of the backlogged 3:1:1 workloads beside the one above (its seed and the next).
SEEDS = 12


def share_draws(workload: str, rules=WORKER) -> list[dict]:
    """``workload`` weighted 3:1:1 on one host, one run per seed: each one's share figures."""
    spec, median, seed = fairness.WORKLOADS[workload]
    p = fairness.share_policy("cap", 1, 8, LATENCY, fairness.WEIGHTS["3:1:1"],
                              fairness.HALF_LIFE)
    return [fairness.share_figures(rows_of_schedule(simulate(
        synthetic(spec, median=median, seed=s), p, rules=rules)), fairness.WEIGHTS["3:1:1"])
        for s in range(seed, seed + SEEDS)]


def share_id(run):
    return "-".join(map(str, run))


class TestFairShareTargets:
    @pytest.mark.parametrize("run", SHARE_RUNS, ids=share_id)
    def test_each_tenant_gets_its_weighted_share_within_ten_percent(self, run):
        """While three tenants are backlogged, each one's licence-seconds are within 10% of
        its weighted share, whichever tenant has the 4x longer jobs."""
        workload, weighting, hosts = run
        got = fairness.share_figures(rows_of_schedule(shared(workload, weighting,
                                                              hosts=hosts)),
                                     fairness.WEIGHTS[weighting])
        assert got["worst"] <= fairness.SHARE_TOLERANCE, (got, SHARE_SIMULATED[run])

    @pytest.mark.parametrize("run", SHARE_RUNS, ids=share_id)
    def test_jain_index_of_weight_normalised_licence_time(self, run):
        """Jain's index of licence-seconds per unit of share is at least 0.95."""
        workload, weighting, hosts = run
        got = fairness.share_figures(rows_of_schedule(shared(workload, weighting,
                                                              hosts=hosts)),
                                     fairness.WEIGHTS[weighting])
        assert got["jain"] >= fairness.JAIN_FLOOR, (got, SHARE_SIMULATED[run])

    @pytest.mark.parametrize("workload", ["share", "share-long-a"])
    def test_the_weighted_shares_hold_in_every_draw_of_the_workload(self, workload):
        """Weighted 3:1:1, c's jobs the long ones or a's: in each of twelve draws of the
        workload (seeds), every tenant within 10% of its weighted share (simulated: worst
        6.7% and 6.0%)."""
        worst = max(got["worst"] for got in share_draws(workload))
        assert worst <= fairness.SHARE_TOLERANCE, worst

    def test_a_running_job_counted_by_its_time_so_far_alone_overshoots_long_jobs(self):
        """The guard above can fail: with each running job counted only by its time so
        far (no typical run), c, whose jobs are 4x longer, is given a slot at each that
        frees while its long jobs have just started, and overshoots its quarter by more
        than 10% in some draws (simulated: 12.8%)."""
        blind = attrs.evolve(WORKER, running_usage=lambda starts, now, typical=0.0:
                             running_usage(starts, now))
        assert max(got["worst"] for got in share_draws("share", blind)) > \
            fairness.SHARE_TOLERANCE

    @pytest.mark.parametrize("run", [("share", "equal"), ("share", "3:1:1"),
                                     ("share-long-a", "3:1:1")], ids=share_id)
    def test_the_count_caps_alone_miss_the_weighted_share(self, run):
        """The guard can fail: the same runs under the count caps alone (half-life 0)
        miss a weighted share by more than 10% (about a third each, whatever the weights;
        equal only by luck, as in share-long-a's: 0.097)."""
        got = fairness.share_figures(rows_of_schedule(shared(*run, half_life=0.0)),
                                     fairness.WEIGHTS[run[1]])
        assert got["worst"] > fairness.SHARE_TOLERANCE

    @pytest.mark.parametrize("hosts", [1, 2])
    def test_a_late_tenant_starts_at_the_first_slot_freed(self, hosts):
        """Tenants arriving while two others hold every slot start their first job at the
        next job end: p95 wait within 1.2x of the p95 time to it (simulated 1.10 and 0.44),
        and each of them in the first slot freed after it came (``fairness.GRACE``)."""
        got = fairness.arrival_figures(rows_of_schedule(shared("arrival", hosts=hosts)))
        assert got["ratio"] <= fairness.ARRIVAL_BOUND, got
        assert got["first_slot"] == 1.0, got

    @pytest.mark.parametrize("policy", ["cap", "borrow"])
    @pytest.mark.parametrize("workload", ["mixed", "long"])
    def test_quiet_tenants_p95_stays_within_perfect_delivery(self, workload, policy):
        """Fair share on, quiet tenants' p95 wait is still at most 1.25x perfect delivery
        of the same policy (simulated 1.04-1.18)."""
        real = measure(rows_of_schedule(shared(workload, policy=policy)), 8)
        ideal = measure(rows_of_schedule(shared(workload, policy=policy, perfect=True)), 8)
        assert real["quiet_p95"] / ideal["quiet_p95"] <= 1.25

    @pytest.mark.parametrize("run", [("share", "equal"), ("share", "3:1:1"),
                                     ("share-long-a", "equal"), ("share-long-a", "3:1:1"),
                                     ("mixed", "equal"), ("long", "equal"),
                                     ("arrival", "equal")], ids=share_id)
    def test_a_job_still_costs_at_most_four_calls(self, run):
        """Fair share adds no AWS call of its own: at most 4 calls per job on its path
        (simulated 2.75-3.54). ``share`` 3:1:1 measured 4.25 while a message beyond the
        free slots was given back unless its tenant was known at its cap: a's, weighted 3
        at its cap of 4, came round again and again only to be held."""
        assert path_calls(shared(*run)) <= CALLS_PER_JOB
