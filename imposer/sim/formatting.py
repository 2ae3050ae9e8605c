"""The variants of `imposer simulate` as text: one row per variant, then waits per tenant."""

from __future__ import annotations

from imposer.reports.formatting import format_seconds
from imposer.sim.variants import SEARCH_LIMIT

#: Tenants shown in the per-tenant table (all of them are in --json).
TENANT_ROWS = 20


def format_rows(rows, source: str, base) -> list[str]:
    """The variants table, then p50/p95 waits per tenant and variant."""
    s = format_seconds
    first = rows[0].figures
    tenants = len(first.per_tenant)
    shares = any(r.figures.policy.sharing for r in rows)
    lines = [f"workload      {first.jobs} jobs of {tenants} tenant(s) from {source}",
             f"heavy         {', '.join(first.heavy_tenants) or '-'} (more than an equal share "
             "of run time); the others are quiet",
             f"settings      park {s(base.park_seconds)}, deferral {s(base.defer_seconds)}, "
             f"retry {s(base.retry_seconds)} x {base.max_attempts} attempts, "
             f"{'fair-queue' if base.fair_queues else 'strict'} delivery, AWS call "
             f"{1000 * base.call_seconds:g} ms, receive {1000 * base.receive_seconds:g} ms, "
             f"long poll {s(base.poll_seconds)}"
             + ("; tier caps " + ", ".join(f"{t}={c}" for t, c in base.caps) if base.caps
                else "")
             + ("; express " + ", ".join(base.express) if base.express else ""),
             "",
             f"{'#':>2} {'HOSTS':>5} {'SLOTS':>5} {'CAP':>3} {'BORROW':>6} "
             + (f"{'SHARE':>16} " if shares else "") +
             f"{'UTIL':>5} "
             f"{'>3MIN':>6} {'QUIET P50/P95':>15} {'HEAVY P50/P95':>15} {'BUSIEST DAY':>18} "
             f"{'MIN SLOTS':>9}  VERDICT"]
    for n, row in enumerate(rows, 1):
        f, p = row.figures, row.figures.policy
        lend = f"r{p.reserve}" if p.borrow else "off"
        day = f"{f.busiest_day[5:]} {s(f.busiest_makespan)}" if f.busiest_day else "-"
        least = "-" if not row.searched else (str(row.min_slots) if row.min_slots
                                              else f">{SEARCH_LIMIT * p.slots}")
        share = ""
        if shares:
            share = f"{share_label(p):>16} "
        lines.append(
            f"{n:>2} {p.hosts:>5} {p.slots:>5} {p.cap:>3} {lend:>6} {share}{f.utilisation:>5.0%} "
            f"{f.slow_share:>6.1%} {s(f.quiet.p50) + '/' + s(f.quiet.p95):>15} "
            f"{s(f.heavy.p50) + '/' + s(f.heavy.p95):>15} {day:>18} {least:>9}  "
            f"{f.verdict.text}" + (f" ({f.paused} paused)" if f.paused else ""))
    names = sorted(first.per_tenant, key=lambda t: -first.per_tenant[t].jobs)
    lines += ["", "p50/p95 wait per tenant and variant"
              + (f" (the {TENANT_ROWS} busiest; --json has all)" if len(names) > TENANT_ROWS
                 else ""),
              f"{'TENANT':16} {'JOBS':>6} " + " ".join(f"{'#' + str(n):>15}"
                                                       for n in range(1, len(rows) + 1))]
    for tenant in names[:TENANT_ROWS]:
        cells = []
        for row in rows:
            w = row.figures.per_tenant.get(tenant)
            cells.append(f"{s(w.p50) + '/' + s(w.p95):>15}" if w else f"{'-':>15}")
        lines.append(f"{tenant[:16]:16} {first.per_tenant[tenant].jobs:>6} " + " ".join(cells))
    if len(first.per_priority) > 1 or first.with_due:
        lines += ["", "p50/p95 wait per priority (0 most urgent), and jobs started after their "
                  "due time, per variant"]
        for prio in sorted(first.per_priority):
            cells = []
            for row in rows:
                w = row.figures.per_priority.get(prio)
                cells.append(f"{s(w.p50) + '/' + s(w.p95):>15}" if w else f"{'-':>15}")
            lines.append(f"{'priority ' + str(prio):16} {first.per_priority[prio].jobs:>6} "
                         + " ".join(cells))
        if first.with_due:
            lines.append(f"{'started late':16} {first.with_due:>6} "
                         + " ".join(f"{row.figures.late:>15}" for row in rows))
    lines += ["", "UTIL is busy slot time from the first arrival to the last end; >3MIN the "
              "share of starts that waited longer than the licence rule's threshold; MIN SLOTS "
              "the fewest slots per host at which the rule stops saying at capacity."
              + (" SHARE: fair share's usage half-life and weights (others weigh 1), or off."
                 if shares else "")]
    return lines


def share_label(policy) -> str:
    """``off``, or the half-life and the weights: ``1h a=3,b=2``."""
    if not policy.sharing:
        return "off"
    weights = ",".join(f"{t}={w:g}" for t, w in policy.weights)
    return f"{format_seconds(policy.half_life)} {weights or 'equal'}"[:16]
