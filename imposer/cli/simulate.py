"""`imposer simulate`: how many licences, which caps, borrowing or not, before buying.

The workload is the jobs table's last ``--since`` (28 days by default), a JSONL export
of `imposer jobs --export`, or a generated one (``--synthetic``). Every
combination of the variant options is one row; ``capacity_outlook`` is what
`imposer capacity` prints when its rule says "at capacity".
"""

from __future__ import annotations

import json
import time
from typing import Callable, Sequence

import click

from imposer.cli.common import (
    TABLE_NAMES,
    InputFile,
    OutputFile,
    duration,
    handle_errors,
    settings_options,
)
from imposer.errors import ConfigError
from imposer.settings import Settings

#: Monday 2024-01-01 08:00 UTC: synthetic workloads start at the top of a working day.
SYNTHETIC_ORIGIN = 1704096000.0
#: Tenants shown in the per-tenant table (all of them are in --json).
TENANT_ROWS = 20
#: Largest host, slot or cap count a variant may have.
MAX_COUNT = 10_000
#: Largest export `--from-export` reads (about four million job records).
MAX_EXPORT_MB = 4096
#: A typical SQS or DynamoDB call from EC2, milliseconds.
AWS_MS = 20.0


def _ints(ctx, param, value):
    if value is None:
        return None
    try:
        out = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers") from None
    if not out or min(out) < (1 if param.name in ("hosts", "slot_counts") else 0):
        raise click.BadParameter(f"{value!r}: give one or more counts, e.g. 8,10,12")
    if max(out) > MAX_COUNT:
        raise click.BadParameter(f"{value[:80]!r}: a count is at most {MAX_COUNT}")
    return out


def _switches(ctx, param, value):
    if value is None:
        return None
    words = {"on": True, "off": False, "1": True, "0": False, "yes": True, "no": False}
    try:
        return tuple(dict.fromkeys(words[v.strip().lower()] for v in value.split(",")))
    except KeyError:
        raise click.BadParameter(f"{value!r}: say on, off or on,off") from None


def _half_lives(ctx, param, value):
    """``0,1h,7d``: usage half-lives for fair share, 0 (or off) for the count caps alone."""
    from imposer.reports.formatting import parse_duration

    if value is None:
        return None
    out = []
    for part in (v.strip() for v in value.split(",")):
        try:
            out.append(0.0 if part.lower() in ("0", "off") else parse_duration(part))
        except ConfigError as exc:
            raise click.BadParameter(f"{exc}; or 0 for off") from None
    return tuple(dict.fromkeys(out))


def _weightings(ctx, param, values):
    """Each ``--weights`` is one weighting: ``a=3,b=2`` (others weigh 1) or ``equal``."""
    out = []
    for value in values:
        weights = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            if part == "equal":
                continue
            tenant, _, weight = part.partition("=")
            try:
                w = float(weight)
            except ValueError:
                w = -1.0
            if not tenant or not w >= 0 or w == float("inf"):
                raise click.BadParameter(f"{part[:80]!r} is not TENANT=W (W a number >= 0)")
            weights[tenant] = w
        out.append(tuple(sorted(weights.items())))
    return tuple(dict.fromkeys(out))


def _cap_of(ctx, param, values):
    caps = {}
    for value in values:
        tenant, _, cap = value.partition("=")
        if not tenant or not cap.isdigit():
            raise click.BadParameter(f"{value!r} is not TENANT=N")
        caps[tenant] = int(cap)
    return caps


@click.command()
@click.option("--since", callback=duration, default="28d", show_default=True,
              metavar="DURATION",
              help="Replay the jobs table's records of the last DURATION (the default source).")
@click.option("--days", type=click.IntRange(1, 400), hidden=True,
              deprecated="say --since Nd instead")
@click.option("--from-export", "export", type=InputFile(MAX_EXPORT_MB),
              help="Replay the JSON lines of `imposer jobs --export` instead.")
@click.option("--synthetic", metavar="SPEC",
              help="Replay a generated workload instead: NAME=COUNT[xTENANTS][@START][/SPREAD],"
                   " e.g. noisy=100@0,quiet=5x2@3 (START and SPREAD in s, m, h, d).")
@click.option("--median", type=float, default=60.0, show_default=True,
              help="Synthetic: median run seconds (log-normal).")
@click.option("--sigma", type=float, default=0.45, show_default=True,
              help="Synthetic: spread of the log-normal run times.")
@click.option("--seed", type=int, default=7, show_default=True, help="Synthetic: random seed.")
@click.option("--hosts", callback=_ints, metavar="N[,N...]",
              help="Host counts [default: the hosts seen in the window, else 1].")
@click.option("--slots", "slot_counts", callback=_ints, metavar="N[,N...]",
              help="Slots per host [default: IMPOSER_SLOTS].")
@click.option("--cap", "cap_values", callback=_ints, metavar="N[,N...]",
              help="Default per-tenant caps [default: IMPOSER_DEFAULT_CAP].")
@click.option("--cap-of", multiple=True, callback=_cap_of, metavar="TENANT=N",
              help="A tenant's cap (repeatable); wins over the tenants table.")
@click.option("--borrow", "borrow_values", callback=_switches, metavar="on|off|on,off",
              help="Borrowing idle slots [default: IMPOSER_BORROW].")
@click.option("--reserve", callback=_ints, metavar="N[,N...]",
              help="Slots per host kept from borrowed work [default: IMPOSER_RESERVE_SLOTS].")
@click.option("--half-life", "half_lives", callback=_half_lives, metavar="DURATION[,...]",
              help="Fair share of licence time: usage half-lives to compare, e.g. 0,1h,7d "
                   "(0 = off, the count caps alone) [default: 0].")
@click.option("--weights", "weightings", multiple=True, callback=_weightings,
              metavar="TENANT=W[,...]",
              help="Fair share: one weighting per use, e.g. --weights equal --weights "
                   "big=3 (others weigh 1, 0 pauses); variants only where a half-life is set.")
@click.option("--call-ms", type=click.FloatRange(0), default=AWS_MS, show_default=True,
              help="Milliseconds one SQS or DynamoDB call takes the worker's parent.")
@click.option("--receive-ms", type=click.FloatRange(0), default=AWS_MS, show_default=True,
              help="Milliseconds one SQS receive takes when messages are waiting.")
@click.option("--perfect", is_flag=True,
              help="Instant delivery: no AWS time, park window or deferral (the cap's "
                   "reference).")
@click.option("--no-search", is_flag=True,
              help="Skip the search for the smallest slot count that meets the licence rule.")
@click.option("--chart", "chart_path", type=OutputFile(),
              help="Also draw waits and utilisation per variant to this PNG (chart extra).")
@click.option("--json", "as_json", is_flag=True, help="Print every variant as JSON.")
@settings_options(*TABLE_NAMES, "park_seconds", "defer_seconds", "retry_seconds",
                  "max_attempts", "poll_seconds", "cap_cache_seconds")
@handle_errors
def simulate(settings: Settings, since, days, export, synthetic, median, sigma, seed, hosts,
             slot_counts, cap_values, cap_of, borrow_values, reserve, half_lives, weightings,
             call_ms, receive_ms, perfect, no_search, chart_path, as_json) -> None:
    """Replay a workload through imposer's own policy, one row per variant.

    Virtual time, the worker's own rules (cap, park and hand-off, fair-queue
    delivery, borrowing and reserve, retries, fair share of licence time by
    weights and decayed usage): utilisation, long waits, p50
    and p95 wait per tenant and for quiet vs heavy tenants, the busiest day's
    makespan, the licence rule's verdict and the smallest slot count that
    meets it. Jobs cannot be preempted, run times are replayed as recorded,
    and tenants are assumed to behave as they did.
    """
    from imposer.sim.variants import Grid, Runner

    if export and synthetic:
        raise click.UsageError("give --from-export or --synthetic, not both")
    now, source = None, None
    fleet: dict[str, int] = {}
    caps: dict[str, int] = {}
    if synthetic:
        from imposer.sim.workload import synthetic as generate

        jobs = generate(synthetic, median=median, sigma=sigma, seed=seed,
                        origin=SYNTHETIC_ORIGIN)
        source = f"synthetic {synthetic} (median {median:g}s, sigma {sigma:g}, seed {seed})"
    elif export:
        from imposer.sim.workload import from_jsonl

        jobs = from_jsonl(export)
        source = f"export {export}"
    else:
        window = since if days is None else days * 86400.0
        jobs, fleet, caps, now, source = _from_tables(settings, window)
    if not jobs:
        click.echo(json.dumps({"source": source, "jobs": 0, "variants": []}) if as_json
                   else f"no jobs to simulate ({source})")
        return
    base = policy_of(settings, caps={**caps, **cap_of}, call_ms=call_ms,
                     receive_ms=receive_ms)
    if perfect:
        base = base.perfect()
    grid = Grid(base=base, hosts=hosts or (max(1, len(fleet)),),
                slots=slot_counts or (max(fleet.values(), default=settings.slots),),
                caps=cap_values or (settings.default_cap,),
                borrow=borrow_values or (settings.borrow,),
                reserve=reserve or (settings.reserve_slots,),
                half_lives=half_lives or (0.0,), weightings=weightings or ((),))
    thresholds = None
    if now is not None:  # the jobs table's window is the verdict's
        from imposer.reports.capacity import Thresholds

        thresholds = Thresholds(window_seconds=window)
    runner = Runner(jobs, thresholds=thresholds, now=now)
    rows = runner.rows(grid, search=not no_search)
    if chart_path:
        from imposer.sim.chart import chart

        chart(rows, chart_path)
    if as_json:
        click.echo(json.dumps({"source": source, "jobs": len(jobs),
                               "variants": [r.to_dict() for r in rows]}, indent=2))
        return
    for line in format_rows(rows, source, base):
        click.echo(line)
    if chart_path:
        click.echo(f"\nchart written to {chart_path}")


def policy_of(settings: Settings, *, caps: dict, call_ms: float = AWS_MS,
              receive_ms: float = AWS_MS, hosts: int = 1, slots: int | None = None):
    """The settings `imposer run` would have, as the simulator's base policy.

    The long poll is the worker's for every workload: the parent collects a
    child the moment it ends (its receive runs in a thread), so a recorded
    run time does not hold the poll; the poll delays only a hand-off owed
    to a host's last free slot.
    """
    from imposer.sim.engine import Policy

    return Policy(hosts=hosts, slots=slots or settings.slots, cap=settings.default_cap,
                  caps=caps, borrow=settings.borrow, reserve=settings.reserve_slots,
                  park_seconds=settings.park_seconds, defer_seconds=settings.defer_seconds,
                  retry_seconds=settings.retry_seconds, max_attempts=settings.max_attempts,
                  call_seconds=call_ms / 1000, receive_seconds=receive_ms / 1000,
                  poll_seconds=settings.poll_seconds,
                  cap_cache_seconds=settings.cap_cache_seconds)


def _from_tables(settings: Settings, seconds: float):
    from imposer.aws import session
    from imposer.reports.formatting import format_seconds
    from imposer.sim.sources import read_rows, read_window
    from imposer.worker.wiring import connect

    backends = connect(settings)
    now = backends.clock.time()
    since = now - seconds
    before = sum(session.CALLS.snapshot().values())
    rows = read_rows(backends.rollups, since, now)
    window = read_window(backends.jobs, backends.tenants, rows, since=since, until=now)
    calls = sum(session.CALLS.snapshot().values()) - before
    source = f"jobs table, last {format_seconds(seconds)} ({calls} AWS calls to read)"
    return list(window.jobs), window.hosts, window.caps, now, source


def format_rows(rows, source: str, base) -> list[str]:
    """The variants table, then p50/p95 waits per tenant and variant."""
    from imposer.reports.formatting import format_seconds as s
    from imposer.sim.variants import SEARCH_LIMIT

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
                else ""),
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
    lines += ["", "UTIL is busy slot time from the first arrival to the last end; >3MIN the "
              "share of starts that waited longer than the licence rule's threshold; MIN SLOTS "
              "the fewest slots per host at which the rule stops saying at capacity."
              + (" SHARE: fair share's usage half-life and weights (others weigh 1), or off."
                 if shares else "")]
    return lines


def share_label(policy) -> str:
    """``off``, or the half-life and the weights: ``1h a=3,b=2``."""
    from imposer.reports.formatting import format_seconds

    if not policy.sharing:
        return "off"
    weights = ",".join(f"{t}={w:g}" for t, w in policy.weights)
    return f"{format_seconds(policy.half_life)} {weights or 'equal'}"[:16]


def capacity_outlook(settings: Settings, backends, rows: Sequence, verdict, now: float,
                     echo: Callable[[str], None], extra: int = 4) -> list[dict]:
    """Replay the window with 1..*extra* more slots per host; print how long waits would drop."""
    import attrs

    from imposer.reports.formatting import format_seconds
    from imposer.sim.sources import read_window
    from imposer.sim.variants import Runner

    from imposer.reports.history import HostHour

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
    base = policy_of(settings, caps=window.caps, hosts=hosts, slots=slots)
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
