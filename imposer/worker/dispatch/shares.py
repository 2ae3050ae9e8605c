"""Fair share of licence time (IMPOSER_SHARE_HALF_LIFE): who of the tenants waiting gets a slot.

Jobs are not preempted, so fairness in licence time is decided one free slot
at a time: a tenant far above its weighted share of recent licence-seconds
(``policy.yields_to``) leaves the slot to the waiting tenant furthest below
its share, and is held (parked, like a tenant at its cap) though below its
cap; a tenant alone, or within the slack, takes it as under the count caps.
Usage is charged by the release that ends each job (``LeaseStore`` adds it to
the tenant's usage item in the release's own transaction).

What the rule knows is read in the background (``refresh``, every
``IMPOSER_REDRIVE_SECONDS``): the open-jobs index (who has queued work and
what runs where, since when), the counters, the usage items and the tenants'
weights and caps: one read of each per interval per host, whatever the
number of jobs. This host's own running jobs are taken from its running
table at the moment of each decision, each running job counting its time so
far or its tenant's typical run if longer (``ran``: from the jobs this host
settled), and a tenant whose message a receive brought lately is taken to
have more in the queue (``seen``). What this host's own releases charged
since the usage was last read is counted at once (``charged``): the freed
slot is decided right after the release, when its job has left the running
table and the background read does not have its charge yet. The acquire
then conditions the tenant's counter on the slots the decision counted
(``limit``), so two hosts deciding at once cannot both hand the tenant a
slot that only one decision allowed.
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable, Mapping

import attrs

from imposer.clock import Clock
from imposer.models.usage import decayed
from imposer.state.jobs import JobStore
from imposer.state.leases import LeaseStore
from imposer.state.tenants import TenantStore
from imposer.worker import policy
from imposer.worker.running import RunningTable

logger = logging.getLogger(__name__)

#: A tenant one of whose messages a receive brought this recently is taken to have more work
#: waiting in the queue.
DEMAND_SECONDS = 5.0
#: A tenant whose hand-off found nothing to start is not waited for this long: its notes
#: were taken, or their messages are back in the queue (notes outlive their window).
NOTHING_SECONDS = 1.0
#: Tenants whose typical run this host keeps (the least recently settled forgotten first).
TYPICAL_KEPT = 10_000


@attrs.frozen(kw_only=True)
class ShareView:
    """What the share rule knows, as of the last background read."""

    #: Tenants with queued work (parked or deferred, on any host).
    waiting: frozenset[str] = frozenset()
    #: tenant -> start times (epoch seconds) of its jobs running on other hosts.
    elsewhere: Mapping[str, tuple[float, ...]] = attrs.field(factory=dict)
    #: tenant -> its forward-decayed usage terms (era -> amount).
    usage: Mapping[str, Mapping[int, float]] = attrs.field(factory=dict)
    #: tenant -> own-slot leases on other hosts (its counter less this host's).
    inflight_elsewhere: Mapping[str, int] = attrs.field(factory=dict)
    weights: Mapping[str, float] = attrs.field(factory=dict)
    caps: Mapping[str, int] = attrs.field(factory=dict)
    #: Slots of the fleet: this host's times the hosts seen running work (at least one).
    slots: int = 1


def usage_table(usage: Mapping[str, Mapping[int, float]], weights: Mapping[str, float],
                caps: Mapping[str, int], default_cap: int, waiting: Iterable[str], now: float,
                half_life: float, slots: int) -> list[dict]:
    """Each tenant with recent usage or work waiting: its decayed licence-seconds, weight,
    weighted share, part of the usage and the gap (``imposer stats``)."""
    names = sorted(set(waiting) | {t for t, terms in usage.items()
                                   if policy.usage_at(terms, now, half_life) >= 0.01})
    standing = [policy.TenantShare(tenant=t, weight=weights.get(t, 1.0),
                                   cap=caps.get(t, default_cap),
                                   usage=policy.usage_at(usage.get(t, {}), now, half_life))
                for t in names]
    shares = policy.weighted_shares(standing, slots)
    gaps = policy.share_gaps(standing, slots)
    total = sum(t.usage for t in standing)
    return [{"tenant_id": t.tenant, "usage_seconds": round(t.usage, 1), "weight": t.weight,
             "share": round(shares[t.tenant], 4),
             "used": round(t.usage / total, 4) if total else 0.0,
             "gap": round(gaps[t.tenant], 4)} for t in standing]


class SharePolicy:
    """Decide, by weighted share of decayed licence time, whether a tenant takes a free slot."""

    def __init__(self, *, half_life: float, host_id: str, slots: int, leases: LeaseStore,
                 jobs: JobStore, tenants: TenantStore, running: RunningTable,
                 clock: Clock) -> None:
        #: IMPOSER_SHARE_HALF_LIFE: 0 turns fair share off.
        self.half_life = half_life
        self.enabled = self.half_life > 0
        self.host, self.host_slots = host_id, slots
        self.leases, self.jobs, self.tenants, self.running = leases, jobs, tenants, running
        self.clock = clock
        self._view = ShareView(slots=slots)
        self._demand: dict[str, float] = {}
        #: tenant -> monotonic time until which it is not waited for (``nothing_to_start``)
        self._nothing: dict[str, float] = {}
        #: tenant -> its typical run in seconds, from the jobs settled here (least recent first)
        self._typical: dict[str, float] = {}
        #: tenant -> charges this host's releases made that the last read of the usage may
        #: not have: (when the release was known done, when it ended, its seconds)
        self._charged: dict[str, list[tuple[float, float, float]]] = {}
        self._lock = threading.Lock()

    # -- the background read ------------------------------------------------------------
    def refresh(self) -> None:
        """Re-read who waits, what runs, the usage, weights and caps (a background pass)."""
        if not self.enabled:
            return
        records = self.jobs.open_jobs(("queued", "running"))
        waiting = {r.tenant_id for r in records if r.status.value == "queued"}
        elsewhere: dict[str, list[float]] = {}
        hosts = {self.host}
        for r in records:
            if r.status.value == "running" and r.host and r.host != self.host:
                hosts.add(r.host)
                if r.started_at is not None:
                    elsewhere.setdefault(r.tenant_id, []).append(r.started_at)
        counters = self.leases.counters()
        here = self._here()
        configs = self.tenants.list()
        read_at = self.clock.time()  # a charge known before this is in the usage read next
        usage = self.leases.usage()
        view = ShareView(
            waiting=frozenset(waiting),
            elsewhere={t: tuple(s) for t, s in elsewhere.items()},
            usage=usage,
            inflight_elsewhere={t: max(0, c.inflight - here.get(t, 0))
                                for t, c in counters.items()},
            weights={c.tenant_id: c.weight for c in configs if c.weight is not None},
            caps={c.tenant_id: c.cap for c in configs if c.cap is not None},
            slots=self.host_slots * len(hosts))
        with self._lock:
            self._view = view
            self._charged = {t: kept for t, charges in self._charged.items()
                             if (kept := [c for c in charges if c[0] > read_at])}

    def view(self) -> ShareView:
        with self._lock:
            return self._view

    # -- what the parent tells it ---------------------------------------------------------
    def seen(self, tenant: str) -> None:
        """A receive brought a message of *tenant*: more of its work is likely queued."""
        if self.enabled:
            self._demand[tenant] = self.clock.monotonic()

    def ran(self, tenant: str, seconds: float) -> None:
        """A job of *tenant* that ran *seconds* was settled here: its typical run moves
        (``policy.typical_run``), which each of its running jobs counts for at least."""
        if self.enabled:
            self._typical[tenant] = policy.typical_run(self._typical.pop(tenant, None), seconds)
            if len(self._typical) > TYPICAL_KEPT:
                self._typical.pop(next(iter(self._typical)))

    def charged(self, tenant: str, seconds: float, at: float) -> None:
        """A release of this host charged *seconds* ending at *at* (epoch) to *tenant*'s
        usage: count them until a read of the usage has them."""
        if self.enabled:
            with self._lock:
                self._charged.setdefault(tenant, []).append((self.clock.time(), at, seconds))

    def queue_empty(self) -> None:
        """A receive came back empty: nobody's work waits in the queue."""
        self._demand.clear()

    def nothing_to_start(self, tenant: str) -> None:
        """A hand-off of *tenant* found no parked job to start: for a moment, nobody leaves
        a slot to it (else everyone yields to a tenant nothing of which can start)."""
        if self.enabled:
            self._nothing[tenant] = self.clock.monotonic() + NOTHING_SECONDS
            self._demand.pop(tenant, None)

    # -- the decisions ----------------------------------------------------------------------
    def standing(self, asking: str | None = None, parked: Iterable[str] = (),
                 ending: str | None = None) -> list[policy.TenantShare]:
        """The rule's view now: every tenant running or waiting, with its usage so far;
        the job of epoch *ending* counts in its tenant's usage, not among its slots."""
        now, mono = self.clock.time(), self.clock.monotonic()
        with self._lock:  # the view and the charges it has not read, as one
            view, charged = self._view, {t: list(c) for t, c in self._charged.items()}
        mine: dict[str, list[float]] = {}
        own = self._here(ending)
        for job in self.running.snapshot():
            mine.setdefault(job.request.tenant_id, []).append(job.lease.acquired_at)
        waiting = set(view.waiting) | set(parked) | {
            t for t, at in self._demand.items() if mono - at < DEMAND_SECONDS}
        waiting -= {t for t, until in self._nothing.items() if until > mono}
        if asking:
            waiting.add(asking)
        out = []
        for tenant in sorted(waiting | set(mine) | set(view.elsewhere)):
            starts = (*view.elsewhere.get(tenant, ()), *mine.get(tenant, ()))
            used = policy.usage_at(view.usage.get(tenant, {}), now, self.half_life) + \
                policy.running_usage(starts, now, self._typical.get(tenant, 0.0)) + \
                sum(decayed(seconds, now - at, self.half_life)
                    for _, at, seconds in charged.get(tenant, ()))
            out.append(policy.TenantShare(
                tenant=tenant, weight=self.weight_of(tenant), cap=self.cap_of(tenant),
                inflight=view.inflight_elsewhere.get(tenant, 0) + own.get(tenant, 0),
                usage=used, waiting=tenant in waiting))
        return out

    def decide(self, tenant: str, parked: Iterable[str] = (),
               ending: str | None = None) -> tuple[str | None, int | None]:
        """Both of fair share's answers for *tenant* from one read of the standing: the
        tenant it leaves a free slot to now (None: it may take it) and its acquire's bound
        (``limit``: the slots the decision counted plus one, so a slot another host gave it
        meanwhile refuses this one). (None, None) with fair share off.

        *ending*: the epoch of a job of this host about to be released, whose slot
        is the one asked about (a promise made before its release): it holds no
        slot of its tenant's in this decision, as after the release.
        """
        if not self.enabled:
            return None, None
        shares, slots = self.standing(tenant, parked, ending), self.view().slots
        bound = next(t.inflight for t in shares if t.tenant == tenant) + 1
        if policy.may_start(tenant, shares, slots):
            return None, bound
        return policy.yields_to(tenant, shares, slots) or tenant, bound

    def yields_to(self, tenant: str, parked: Iterable[str] = (),
                  ending: str | None = None) -> str | None:
        """The tenant *tenant* leaves a free slot to now, or None if it may take it."""
        return self.decide(tenant, parked, ending)[0]

    def choice(self, parked: Iterable[str], exclude: Iterable[str] = ()) -> str | None:
        """Which tenant with parked work (this host's, or queued anywhere) a free slot goes
        to (``policy.next_tenant``), *exclude* passed over."""
        if not self.enabled:
            return None
        parked = (set(parked) | set(self.view().waiting)) - set(exclude)
        shares = [attrs.evolve(t, waiting=t.waiting and t.tenant in parked)
                  for t in self.standing(None, parked)]
        return policy.next_tenant(shares, self.view().slots)

    def gaps(self) -> dict[str, float]:
        """Each active tenant's fraction of recent licence time minus its share."""
        return policy.share_gaps(self.standing(), self.view().slots) if self.enabled else {}

    def weight_of(self, tenant: str) -> float:
        return self.view().weights.get(tenant, 1.0)

    def cap_of(self, tenant: str) -> int:
        return self.view().caps.get(tenant, self.tenants.default_cap)

    def _here(self, ending: str | None = None) -> dict[str, int]:
        """This host's own-slot jobs per tenant (its running table), but the job of
        epoch *ending* (settling: its slot is the one being given)."""
        out: dict[str, int] = {}
        for job in self.running.snapshot():
            if not job.lease.borrowed and job.epoch != ending:
                out[job.request.tenant_id] = out.get(job.request.tenant_id, 0) + 1
        return out
