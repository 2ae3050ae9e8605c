"""Read the workload of the last N days from imposer's own tables, bounded by the window.

Job records are the source: they hold each job's submission time, run time
and attempts, which the hourly rollups only hold as per-hour sums. Which
tenants to read comes from the rollups of the window (one Query per day)
and the tenants table; each tenant's jobs come page by page from the jobs
table's ``by-tenant`` index, between the window's bounds. The cost is
``days + 1`` rollup Queries, one Scan of the small tenants table, and about
one Query per tenant per 1,000 of its jobs (a page is also cut at 1 MB of
items, so say two Queries per 1,000): for four weeks of 50,000 jobs of 40
tenants, about 150 calls. The jobs table is never scanned.
"""

from __future__ import annotations

import attrs

from imposer.reports.history import HostHour, hosts_seen
from imposer.sim.workload import SimJob, from_records
from imposer.state.jobs import JobStore
from imposer.state.rollups import RollupStore
from imposer.state.tenants import TenantStore

#: Records per Query page.
PAGE = 1000


@attrs.frozen(kw_only=True)
class TableWorkload:
    """The window's jobs, and the fleet, caps and fair-share weights that ran them."""

    jobs: tuple[SimJob, ...]
    #: Host id -> slots, for hosts that held a slot in the window.
    hosts: dict[str, int]
    #: Tier overrides, tenant -> cap.
    caps: dict[str, int]
    #: Fair-share weights set in the tenants table, tenant -> weight (others weigh 1).
    weights: dict[str, float] = attrs.field(factory=dict)
    #: Tenants of the express class in the tenants table.
    express: tuple[str, ...] = ()


def read_rows(rollups: RollupStore, since: float, until: float) -> list[HostHour]:
    return [HostHour.from_item(i) for i in rollups.read(since, until)]


def read_window(jobs: JobStore, tenants: TenantStore, rows: list[HostHour], *, since: float,
                until: float) -> TableWorkload:
    """Every job submitted in [since, until] of every tenant the rollups or tier table name."""
    configs = tenants.list()  # (one Scan of the small tenants table)
    caps = {c.tenant_id: c.cap for c in configs if c.cap is not None}
    weights = {c.tenant_id: c.weight for c in configs if c.weight is not None}
    names = sorted({t for r in rows for t in r.tenants} | set(caps))
    records = []
    for tenant in names:
        cursor = None
        while True:
            page, cursor = jobs.for_tenant(tenant, since=since, until=until, limit=PAGE,
                                           cursor=cursor, newest_first=False)
            records += page
            if cursor is None:
                break
    return TableWorkload(jobs=tuple(from_records(records, now=until)),
                         hosts=hosts_seen(r for r in rows if since - 3600 < r.hour < until),
                         caps=caps, weights=weights,
                         express=tuple(sorted(c.tenant_id for c in configs if c.express)))
