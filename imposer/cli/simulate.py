"""`imposer simulate`: how many licences, which caps, borrowing or not, before buying.

The workload is the jobs table's last ``--since`` (28 days by default), a JSONL export
of `imposer jobs --export`, or a generated one (``--synthetic``). Every
combination of the variant options is one row (``imposer.sim.formatting`` prints
them); ``policy_of`` is also the base of what `imposer capacity` prints when
its rule says "at capacity" (``reports.capacity_outlook``).
"""

from __future__ import annotations

import json

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


def _names(ctx, param, values):
    if any(not v.strip() for v in values):
        raise click.BadParameter("give a tenant id")
    return tuple(v.strip() for v in values)


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
              help="Replay a generated workload instead: NAME=COUNT[xTENANTS][@START][/SPREAD]"
                   "[*SCALE][!PRIORITY][~DUE], e.g. noisy=100@0,quiet=5x2@3 or, 5 rush jobs of "
                   "noisy's at 30 s due 1 min after, noisy=100@0,noisy=5@30!0~1m (START, "
                   "SPREAD and DUE in s, m, h, d).")
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
@click.option("--express", "express_of", multiple=True, metavar="TENANT", callback=_names,
              help="A tenant of the express class (repeatable): with borrowing on, its "
                   "parked jobs may borrow the reserve slots too [default: from the tables, "
                   "the tenants table's express tenants; else none].")
@click.option("--no-express", is_flag=True,
              help="Replay without the tenants table's express class.")
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
                   "big=3 (others weigh 1, 0 pauses); variants only where a half-life is set "
                   "[default: the tenants table's weights, or equal for --synthetic and "
                   "--from-export].")
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
             slot_counts, cap_values, cap_of, express_of, no_express, borrow_values, reserve,
             half_lives, weightings, call_ms, receive_ms, perfect, no_search, chart_path,
             as_json) -> None:
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
    if express_of and no_express:
        raise click.UsageError("give --express or --no-express, not both")
    now, source = None, None
    fleet: dict[str, int] = {}
    caps: dict[str, int] = {}
    express: tuple[str, ...] = ()
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
        jobs, fleet, caps, weights, express, now, source = _from_tables(settings, window)
        if not weightings:  # the weights the worker decides with
            weightings = (tuple(sorted(weights.items())),)
    if not jobs:
        click.echo(json.dumps({"source": source, "jobs": 0, "variants": []}) if as_json
                   else f"no jobs to simulate ({source})")
        return
    base = policy_of(settings, caps={**caps, **cap_of}, call_ms=call_ms,
                     receive_ms=receive_ms,
                     express=() if no_express else tuple(express_of) or express)
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
    from imposer.sim.formatting import format_rows

    for line in format_rows(rows, source, base):
        click.echo(line)
    if chart_path:
        click.echo(f"\nchart written to {chart_path}")


def policy_of(settings: Settings, *, caps: dict, call_ms: float = AWS_MS,
              receive_ms: float = AWS_MS, hosts: int = 1, slots: int | None = None,
              express: tuple[str, ...] = ()):
    """The settings `imposer run` would have, as the simulator's base policy.

    The long poll is the worker's for every workload: the parent collects a
    child the moment it ends (its receive runs in a thread), so a recorded
    run time does not hold the poll; the poll delays only a hand-off owed
    to a host's last free slot.
    """
    from imposer.sim.engine import Policy

    return Policy(hosts=hosts, slots=slots or settings.slots, cap=settings.default_cap,
                  caps=caps, borrow=settings.borrow, reserve=settings.reserve_slots,
                  express=tuple(sorted(set(express))), park_seconds=settings.park_seconds,
                  defer_seconds=settings.defer_seconds,
                  retry_seconds=settings.retry_seconds, max_attempts=settings.max_attempts,
                  call_seconds=call_ms / 1000, receive_seconds=receive_ms / 1000,
                  poll_seconds=settings.poll_seconds,
                  cap_cache_seconds=settings.cap_cache_seconds,
                  redrive_seconds=settings.redrive_seconds)


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
    return (list(window.jobs), window.hosts, window.caps, window.weights, window.express, now,
            source)
