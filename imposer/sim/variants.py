"""Variants side by side: every combination of hosts, slots, caps, borrowing and reserve,
and of fair share's usage half-life and weights.

Each row also says the smallest slot count per host (the other settings
kept) at which the licence rule stops saying "at capacity", found by
bisection: more slots make waits no longer and utilisation no higher (up to
the noise of which job happens to start first), so the rule's answer flips
once.
"""

from __future__ import annotations

import itertools
import time
from typing import Callable, Sequence

import attrs

from imposer.reports.capacity import Thresholds
from imposer.sim.engine import Policy, simulate
from imposer.sim.metrics import Figures, figures
from imposer.sim.workload import SimJob

#: The search for the smallest slot count stops here (per host), times the variant's slots.
SEARCH_LIMIT = 8


@attrs.frozen(kw_only=True)
class Grid:
    """The values to combine; ``base`` carries the settings every variant shares."""

    base: Policy = Policy()
    hosts: tuple[int, ...] = (1,)
    slots: tuple[int, ...] = (8,)
    caps: tuple[int, ...] = (4,)
    borrow: tuple[bool, ...] = (False,)
    reserve: tuple[int, ...] = (1,)
    #: Fair share's usage half-lives (0: off) and weightings ((tenant, weight) pairs).
    half_lives: tuple[float, ...] = (0.0,)
    weightings: tuple[tuple[tuple[str, float], ...], ...] = ((),)

    def policies(self) -> list[Policy]:
        """One policy per combination; the reserve varies only where borrowing is on, the
        weights only where fair share is (a half-life above 0)."""
        out: list[Policy] = []
        for hosts, slots, cap, lend, half in itertools.product(
                self.hosts, self.slots, self.caps, self.borrow, self.half_lives):
            for reserve in (self.reserve if lend else self.reserve[:1]):
                for weights in (self.weightings if half > 0 else ((),)):
                    p = attrs.evolve(self.base, hosts=hosts, slots=slots, cap=cap,
                                     borrow=lend, reserve=reserve, half_life=half,
                                     weights=weights)
                    if p not in out:
                        out.append(p)
        return out


@attrs.frozen(kw_only=True)
class Row:
    """One variant's figures, how long simulating it took, and the slots the rule wants."""

    figures: Figures
    seconds: float
    #: Smallest slots per host not "at capacity"; None when even SEARCH_LIMIT x is.
    min_slots: int | None = None
    searched: bool = False

    def to_dict(self) -> dict:
        data = self.figures.to_dict()
        data.update(simulated_in_seconds=round(self.seconds, 3),
                    min_slots=self.min_slots if self.searched else "not searched")
        return data


class Runner:
    """Simulate variants of one workload, remembering each policy's figures."""

    def __init__(self, jobs: Sequence[SimJob], *, thresholds: Thresholds | None = None,
                 now: float | None = None) -> None:
        self.jobs = list(jobs)
        self.thresholds = thresholds or Thresholds()
        self.now = now
        self._seen: dict[Policy, tuple[Figures, float]] = {}

    def figures(self, policy: Policy) -> tuple[Figures, float]:
        if policy not in self._seen:
            start = time.perf_counter()
            result = figures(simulate(self.jobs, policy), thresholds=self.thresholds,
                             now=self.now)
            self._seen[policy] = (result, time.perf_counter() - start)
        return self._seen[policy]

    def at_capacity(self, policy: Policy) -> bool:
        return self.figures(policy)[0].verdict.at_capacity

    def smallest_slots(self, policy: Policy) -> int | None:
        """Bisect for the fewest slots per host the licence rule accepts."""
        def at(slots: int) -> bool:
            return self.at_capacity(attrs.evolve(policy, slots=slots))

        hi = policy.slots
        while at(hi):
            if hi >= SEARCH_LIMIT * policy.slots:
                return None
            hi *= 2
        lo = 0  # at(lo) is taken as "at capacity": no slots at all
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if at(mid):
                lo = mid
            else:
                hi = mid
        return hi

    def rows(self, grid: Grid, search: bool = True,
             progress: Callable[[Policy], None] | None = None) -> list[Row]:
        out = []
        for policy in grid.policies():
            if progress:
                progress(policy)
            result, seconds = self.figures(policy)
            out.append(Row(figures=result, seconds=seconds, searched=search,
                           min_slots=self.smallest_slots(policy) if search else None))
        return out
