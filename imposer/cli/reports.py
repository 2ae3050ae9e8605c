"""The fleet's questions: `stats` (who waits, and why) and `capacity` (is a licence due).

Both read the hourly rollups and the open-jobs index, never the job history
whole; an at-capacity verdict adds the window replayed with more slots
(``capacity_outlook``, the simulator of `imposer simulate`). ``not_received``
and ``queue_line`` say what no record knows yet: messages no worker received.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Callable, Sequence

import click

from imposer.cli.common import (
    QUEUE_NAMES,
    TABLE_NAMES,
    OutputFile,
    duration,
    handle_errors,
    settings_options,
)
from imposer.cli.simulate import policy_of
from imposer.settings import Settings

if TYPE_CHECKING:
    from imposer.reports.capacity import Thresholds, Verdict


def not_received(queue) -> int:
    """Messages in the queue no worker has received yet: their jobs have no record so far."""
    depth = queue.depth()
    return depth["visible"] + depth["delayed"]


def queue_line(waiting: int) -> str:
    return (f"queue: {waiting} message(s) not received by a worker yet (a job has a record "
            "from its first receive)")


@click.command()
@click.option("--since", callback=duration, default="24h", show_default=True,
              metavar="DURATION", help="How far back the history goes (30m, 6h, 7d, 4w).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@settings_options(*TABLE_NAMES, *QUEUE_NAMES, "slots", "default_cap", "rollup_seconds",
                  "share_half_life")
@handle_errors
def stats(settings: Settings, since, as_json) -> None:
    """Per tenant running/waiting/deferred and p50/p95 wait; stranded capacity vs shortage.

    Stranded capacity (a slot idle while a tenant at its cap had work
    waiting) says raise caps or allow borrowing; shortage (all slots busy
    while a tenant below its cap waited) says buy a licence. Live work comes
    from imposer's own records, history from its hourly rollups.
    """
    run_stats(settings, since, as_json, click.echo)


@click.command()
@click.option("--since", callback=duration, default="28d", show_default=True,
              metavar="DURATION", help="How far back to look (30m, 6h, 7d, 4w).")
@click.option("--window", callback=duration, hidden=True, metavar="DURATION",
              deprecated="say --since instead")
@click.option("--util-threshold", type=float, default=0.8, show_default=True,
              help="A working day is busy above this slot utilisation.")
@click.option("--day-share", type=float, default=0.5, show_default=True,
              help="Utilisation condition: busy on more than this share of working days.")
@click.option("--wait-threshold", type=float, default=180, show_default=True,
              help="A job is slow when it waited longer than this many seconds.")
@click.option("--slow-share", type=float, default=0.2, show_default=True,
              help="Wait condition: more than this share of jobs slow.")
@click.option("--chart", "chart_path", type=OutputFile(),
              help="Also draw daily utilisation and slow-job share to this PNG "
                   "(needs the chart extra).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and its days as JSON.")
@click.option("--emit", is_flag=True,
              help="Also log the verdict as EMF metric lines for CloudWatch (licence_busy_days, "
                   "licence_slow_jobs, licence_at_capacity), and skip the simulation an "
                   "at-capacity verdict prints; imposer-capacity.timer runs this hourly.")
@settings_options(*TABLE_NAMES, "slots", "metrics_namespace")
@handle_errors
def capacity(settings: Settings, since, window, util_threshold, day_share, wait_threshold,
             slow_share, chart_path, as_json, emit) -> None:
    """Is a second licence warranted? The seed's rule, both conditions at once.

    At capacity only when slot utilisation is above 80% on more than half of
    working days AND queue wait is above 3 minutes for more than 20% of jobs;
    one condition alone is reported as a likely transient burst.
    """
    from imposer.reports.capacity import Thresholds

    thresholds = Thresholds(util=util_threshold, day_share=day_share,
                            wait_seconds=wait_threshold, slow_share=slow_share)
    run_capacity(settings, since if window is None else window, thresholds, as_json,
                 chart_path, click.echo, emit=emit)


def run_stats(settings: Settings, since_seconds: float, as_json: bool,
              echo: Callable[[str], None], *, now: float | None = None) -> dict:
    """Read the rollups of the window and the open jobs, then print the figures."""
    from imposer.reports.formatting import format_stats
    from imposer.reports.history import HostHour
    from imposer.reports.overview import summarise
    from imposer.worker.wiring import connect

    backends = connect(settings)
    now = backends.clock.time() if now is None else now
    since = now - since_seconds
    items = list(backends.rollups.read(since, now))
    rows = [HostHour.from_item(i) for i in items]
    data = summarise(rows, backends.jobs.open_jobs(), now=now, since=since,
                     caps=backends.tenants.caps(), default_cap=settings.default_cap,
                     slots_per_host=settings.slots)
    # what the records and rollups cannot know yet: messages not received, finishes not flushed
    newest = max((float(i["flushed_at"]) for i in items if "flushed_at" in i), default=None)
    data["queue"] = {"not_received": not_received(backends.queue)}
    data["rollups"] = {"newest_flush": newest, "every_seconds": settings.rollup_seconds,
                       "age_seconds": None if newest is None else round(now - newest, 1)}
    if settings.share_half_life > 0:
        data["fair_share"] = fair_share_of(settings, backends, now)
    if as_json:
        echo(json.dumps(data, indent=2))
    else:
        for line in format_stats(data):
            echo(line)
        for line in format_fair_share(data.get("fair_share"), settings.share_half_life):
            echo(line)
    return data


def fair_share_of(settings: Settings, backends, now: float) -> list[dict]:
    """Usage against weighted share per tenant: the usage items (one per tenant), the
    tenants' rows and who has queued work (the open index); nothing that grows with history."""
    from imposer.worker.dispatch.shares import usage_table

    configs = backends.tenants.list()
    open_jobs = backends.jobs.open_jobs(("queued", "running"))
    hosts = {r.host for r in open_jobs if r.status.value == "running" and r.host}
    slots = settings.slots * max(1, len(hosts))
    rows = usage_table(
        backends.leases.usage(), {c.tenant_id: c.weight for c in configs if c.weight is not None},
        {c.tenant_id: c.cap for c in configs if c.cap is not None}, settings.default_cap,
        {r.tenant_id for r in open_jobs if r.status.value == "queued"}, now,
        settings.share_half_life, slots)
    return [{**row, "fleet_slots": slots} for row in rows]


def share_of(settings: Settings, backends, tenant: str, now: float) -> dict:
    """One tenant's fair-share row (``fair_share_of``) for `why`, with its cap and effective
    cap: the slots its share is of the fleet's, rounded up, never above its cap."""
    import math

    rows = {r["tenant_id"]: r for r in fair_share_of(settings, backends, now)}
    cap = backends.tenants.cap_for(tenant)
    row = rows.get(tenant) or {"tenant_id": tenant, "usage_seconds": 0.0,
                               "weight": backends.tenants.weight_for(tenant), "share": 0.0,
                               "used": 0.0, "gap": 0.0, "fleet_slots": settings.slots}
    return {**row, "cap": cap, "effective_cap": min(cap, max(
        1, math.ceil(row["share"] * row["fleet_slots"] - 1e-9)))}


def format_fair_share(rows: list[dict] | None, half_life: float) -> list[str]:
    """The fair-share table of `imposer stats`: usage vs weighted share per tenant."""
    if rows is None:
        return []
    from imposer.reports.formatting import format_seconds

    lines = ["", f"fair share (usage half-life {format_seconds(half_life)}): licence-seconds "
             "used lately against each tenant's weighted share"]
    if not rows:
        return lines + ["  no tenant has used licence time lately"]
    lines.append(f"  {'TENANT':20} {'USED (S)':>10} {'WEIGHT':>6} {'USED':>6} {'SHARE':>6} "
                 f"{'GAP':>7}")
    for r in rows:
        lines.append(f"  {r['tenant_id'][:20]:20} {r['usage_seconds']:>10.1f} "
                     f"{r['weight']:>6g} {r['used']:>6.1%} {r['share']:>6.1%} "
                     f"{100 * r['gap']:>+6.1f}")
    return lines + ["  GAP: points of licence time above (+) or below (-) the share; the "
                    "furthest below gets the next free slot"]


def run_capacity(settings: Settings, window_seconds: float | None,
                 thresholds: Thresholds | None, as_json: bool, chart_path: str | None,
                 echo: Callable[[str], None], *, now: float | None = None,
                 emit: bool = False) -> Verdict:
    """Apply the licence rule to the rollups of the window; optionally draw the chart and
    log the verdict as metrics."""
    import attrs

    from imposer.reports.capacity import Thresholds, chart, evaluate_hours
    from imposer.reports.capacity import emit as emit_verdict
    from imposer.reports.formatting import format_capacity
    from imposer.reports.history import HostHour
    from imposer.state.rollups import CAPACITY_FIELDS
    from imposer.worker.wiring import connect

    thresholds = thresholds or Thresholds()
    if window_seconds is not None:
        thresholds = attrs.evolve(thresholds, window_seconds=window_seconds)
    backends = connect(settings)
    now = backends.clock.time() if now is None else now
    rows = [HostHour.from_item(i) for i in backends.rollups.read(
        now - thresholds.window_seconds, now, CAPACITY_FIELDS)]
    verdict = evaluate_hours(rows, now=now, thresholds=thresholds)
    if emit:
        emit_verdict(verdict, backends.metrics)
    if chart_path:
        chart(verdict, chart_path)
    if as_json:
        echo(json.dumps(verdict.to_dict(), indent=2))
    else:
        for line in format_capacity(verdict):
            echo(line)
        if chart_path:
            echo(f"\nchart written to {chart_path}")
    # -- at capacity: how much would more slots help? (imposer simulate) ----------------------
    # Not for the hourly --emit: it reads four weeks of jobs, which is for an operator's run.
    if verdict.at_capacity and not as_json and not emit:
        capacity_outlook(settings, backends, rows, verdict, now, echo)
    return verdict


def capacity_outlook(settings: Settings, backends, rows: Sequence, verdict, now: float,
                     echo: Callable[[str], None], extra: int = 4) -> list[dict]:
    """Replay the window with 1..*extra* more slots per host; print how long waits would drop."""
    import attrs

    from imposer.reports.formatting import format_seconds
    from imposer.reports.history import HostHour
    from imposer.sim.sources import read_window
    from imposer.sim.variants import Runner

    since = now - verdict.thresholds.window_seconds
    # the verdict read only its own fields; the replay needs the tenants of each hour too
    rows = [HostHour.from_item(i) for i in backends.rollups.read(since, now)]
    window = read_window(backends.jobs, backends.tenants, rows, since=since, until=now)
    echo("")
    if not window.jobs:
        echo("imposer simulate: no job records in the window to replay")
        return []
    slots = max(window.hosts.values(), default=settings.slots)
    hosts = max(1, len(window.hosts))
    base = policy_of(settings, caps=window.caps, hosts=hosts, slots=slots,
                     express=window.express)
    runner = Runner(window.jobs, thresholds=verdict.thresholds, now=now)
    started = time.perf_counter()
    out = []
    for more in range(extra + 1):
        f, _ = runner.figures(attrs.evolve(base, slots=slots + more))
        out.append({"slots_per_host": slots + more, "slow_share": f.slow_share,
                    "verdict": f.verdict.text})
    threshold = format_seconds(verdict.thresholds.wait_seconds)
    echo(f"imposer simulate: the window's {len(window.jobs)} jobs replayed on {hosts} host(s) "
         f"with more slots ({time.perf_counter() - started:.1f}s)")
    echo(f"{'SLOTS/HOST':>10}  {'WAITED > ' + threshold:>16}  {'CUT':>9}  VERDICT")
    for n, o in enumerate(out):
        cut = "(as now)" if n == 0 else f"-{100 * (out[0]['slow_share'] - o['slow_share']):.1f} pts"
        echo(f"{o['slots_per_host']:>10}  {o['slow_share']:>16.1%}  {cut:>9}  {o['verdict']}")
    echo("(see `imposer simulate --slots ...` for caps, borrowing and hosts side by side)")
    return out
