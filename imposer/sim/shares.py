"""Fair share of licence time in virtual time: usage, and who gets a free slot.

With a half-life set (``Policy.half_life``, IMPOSER_SHARE_HALF_LIFE), every
decision to start a tenant's job under its cap asks
``imposer.worker.policy.next_tenant`` whether that tenant is the one
furthest below its weighted share among the tenants with work waiting
here (parked, or the message in hand); each release charges the attempt's
licence-seconds to its tenant as forward-decayed terms
(``policy.forward_charge``), as the worker's release transaction does, and
a running job counts its time so far, or its tenant's typical run if
longer. A freed slot the settled tenant may not keep goes to the chosen
tenant's parked work, and slots left free after a batch or an empty
receive are filled the same way.
Borrowing keeps its own rules. Off (half-life 0), nothing here runs.
"""

from __future__ import annotations

import attrs

from imposer.worker.dispatch.shares import DEMAND_SECONDS
from imposer.worker.policy import TenantShare


class Shares:
    """Usage per tenant and the share rule's view of the fleet.

    Mixed into ``engine._Fleet``: its methods read and move the fleet's state
    (the queue, the counters, the hosts) as the event loop reaches each step.
    """

    def _share_init(self) -> None:
        p = self.policy
        self.sharing = p.sharing
        self.weight = {t: p.weight_of(t) for t in self.cap}
        if self.sharing:  # weight 0 pauses a tenant under fair share
            for tenant, weight in self.weight.items():
                if weight <= 0:
                    self.cap[tenant] = 0
        #: tenant -> forward-decayed usage terms (era -> amount), charged at each release
        self.usage_terms: dict[str, dict[int, float]] = {t: {} for t in self.cap}
        #: tenant -> {running attempt: its start}: each counts its time so far, or the
        #: tenant's typical run if longer (``policy.running_usage``)
        self.running: dict[str, dict[int, float]] = {t: {} for t in self.cap}
        #: tenant -> its typical run (``policy.typical_run``; one estimate for the fleet,
        #: where each worker keeps its own from the jobs it settles)
        self.typical: dict[str, float] = {}
        self.started = [0.0] * len(self.jobs)
        #: tenant -> when a receive last brought one of its messages (its counter's
        #: ``seen_at``, which the acquire sets): work of it is likely still in the queue
        self.demand: dict[str, float] = {}

    def _usage(self, tenant: str, now: float) -> float:
        """Decayed licence-seconds of the tenant at *now*, its running jobs' time included."""
        return self.rules.usage_at(self.usage_terms[tenant], now, self.policy.half_life) + \
            self.rules.running_usage(self.running[tenant].values(), now,
                                     self.typical.get(tenant, 0.0))

    def _began(self, job: int, now: float) -> None:
        self.started[job] = now
        self.running[self.tenant[job]][job] = now

    def _charge(self, job: int, now: float) -> None:
        """The release: the attempt's licence-seconds join its tenant's usage, and move its
        typical run (``SharePolicy.ran``)."""
        tenant = self.tenant[job]
        self.running[tenant].pop(job, None)
        if self.sharing:
            ran = now - self.started[job]
            charge = self.rules.forward_charge(ran, now, self.policy.half_life)
            self.usage_terms[tenant] = self.rules.fold(self.usage_terms[tenant], *charge)
            self.typical[tenant] = self.rules.typical_run(self.typical.get(tenant), ran)

    def _share_view(self, now: float, asking: str | None = None,
                    ending: bool = False) -> list[TenantShare]:
        """What the rule knows: tenants running or waiting, usage now, parked work waiting;
        *ending*: one job of *asking* is about to be released (its slot is the one asked
        about: it holds no slot in the decision, as after the release)."""
        out = []
        for tenant in self.cap:
            waiting = tenant == asking or self._parked(tenant) or \
                now - self.demand.get(tenant, -DEMAND_SECONDS) < DEMAND_SECONDS
            if not waiting and not self.running[tenant]:
                continue
            inflight = self.inflight[tenant] - (ending and tenant == asking)
            out.append(TenantShare(tenant=tenant, weight=self.weight[tenant],
                                   cap=self.cap[tenant], inflight=inflight,
                                   usage=self._usage(tenant, now), waiting=waiting))
        return out

    def _share_allows(self, tenant: str, now: float, ending: bool = False) -> bool:
        """May the tenant take a free slot under its cap now (``policy.may_start``)? Always,
        with fair share off."""
        if not self.sharing:
            return True
        return self.rules.may_start(tenant, self._share_view(now, tenant, ending),
                                    self.policy.slots_total)

    def _saw(self, tenant: str, now: float) -> None:
        self.demand[tenant] = now

    def _share_choice(self, now: float, exclude=()) -> str | None:
        """The tenant with parked work that a free slot goes to now (``SharePolicy.choice``),
        *exclude* passed over."""
        view = [attrs.evolve(t, waiting=False) if t.tenant in exclude else t
                for t in self._share_view(now)]
        return self.rules.next_tenant(view, self.policy.slots_total)
