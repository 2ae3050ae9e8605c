"""Words and numbers for people: durations in and out, stats and capacity as text.

Every report prints through these, so a duration reads the same in
``imposer stats``, ``imposer why`` and the demo.
"""

from __future__ import annotations

import datetime
import re

from imposer.errors import ConfigError
from imposer.reports.capacity import Verdict

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)


#: The longest window a report may ask for: ten years, far beyond any retention.
MAX_DURATION = 10 * 365 * 86400.0


def parse_duration(text: str) -> float:
    """Turn ``30m``, ``6h``, ``7d``, ``4w`` (or bare seconds) into seconds."""
    match = _DURATION.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(f"not a duration: {str(text)[:80]!r} (want e.g. 30m, 6h, 7d, 4w)")
    seconds = float(match.group(1)) * _UNITS[(match.group(2) or "s").lower()]
    if seconds > MAX_DURATION:
        raise ConfigError(f"{str(text)[:80]!r} is longer than imposer keeps anything "
                          f"(at most {MAX_DURATION // 86400 // 365:.0f} years)")
    return seconds


def format_seconds(seconds: float | None) -> str:
    """Say a duration the way an operator reads it: 42.0s, 3m05s, 2h10m, 4d06h."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    s = int(round(seconds))
    for size, unit, sub, subunit in ((86400, "d", 3600, "h"), (3600, "h", 60, "m"),
                                     (60, "m", 1, "s")):
        if s >= size:
            rest = (s % size) // sub
            return f"{s // size}{unit}{rest:02d}{subunit}" if rest else f"{s // size}{unit}"
    return f"{s}s"


def _when(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC")


def format_stats(data: dict) -> list[str]:
    """Render a stats summary as aligned lines for a terminal."""
    window, c = data["window"], data["cluster"]
    util = "-" if c["slot_utilisation"] is None else f"{c['slot_utilisation']:.1%}"
    lines = [
        f"window       {_when(window['start'])} to {_when(window['end'])} "
        f"({format_seconds(window['seconds'])})",
        f"slots        {len(c['hosts']) or 1} host(s), {c['slots_total']} slots; "
        f"utilisation {util}; {c['running']} running, {c['waiting']} waiting",
    ]
    old = c["oldest_waiting"]
    lines.append("oldest wait  none" if old is None else
                 f"oldest wait  {format_seconds(old['age_seconds'])}: job {old['job_id']} of "
                 f"{old['tenant_id']} ({old['wait_reason'] or old['status']})")
    lines.append(f"stranded     {c['stranded_slot_seconds']:,.0f} slot-s over "
                 f"{format_seconds(c['stranded_seconds'])} (idle slots, capped tenant waiting)")
    lines.append(f"shortage     {format_seconds(c['shortage_seconds'])} "
                 "(all slots busy, a tenant below its cap waiting)")
    width = max([6] + [len(t) for t in data["tenants"]])
    lines.append("")
    lines.append(f"{'TENANT':{width}} {'CAP':>3} {'RUNNING':>7} {'WAITING':>7} {'DEFERS':>6} "
                 f"{'OK':>6} {'FAILED':>6} {'DEAD':>4} {'WAIT p50':>8} {'WAIT p95':>8}")
    for tenant, t in data["tenants"].items():
        lines.append(f"{tenant:{width}} {t['cap']:>3} {t['running']:>7} {t['waiting']:>7} "
                     f"{t['deferred']:>6} {t['succeeded']:>6} {t['failed']:>6} {t['dead']:>4} "
                     f"{format_seconds(t['queue_wait_p50']):>8} "
                     f"{format_seconds(t['queue_wait_p95']):>8}")
    if not data["tenants"]:
        lines.append("(no jobs in the window)")
    lines.extend(_priority_lines(data.get("priorities") or {}))
    queue, rollups = data.get("queue"), data.get("rollups")
    if queue is not None:
        lines.append(f"queue        {queue['not_received']} message(s) not received by a worker "
                     "yet (a job has a record from its first receive)")
    if rollups is not None:
        every = format_seconds(rollups["every_seconds"])
        lines.append("rollups      none written in the window yet" if rollups["age_seconds"] is None
                     else f"rollups      newest written {format_seconds(rollups['age_seconds'])} "
                     f"ago; hosts write every {every}, so jobs finished since are not counted yet")
    lines.append("")
    lines.extend(f"verdict: {v}" for v in c["verdict"])
    return lines


def _priority_lines(priorities: dict) -> list[str]:
    """Waits per priority (docs/priority.rst), when jobs of more than one priority started or
    a job started after its due time; else nothing (a fleet without priorities reads as
    before)."""
    if len(priorities) < 2 and not any(p["started_late"] for p in priorities.values()):
        return []
    lines = ["", f"{'PRIORITY':8} {'STARTED':>7} {'LATE':>5} {'WAIT p50':>8} {'WAIT p95':>8}"
             "   (0 most urgent; LATE: started after the due time)"]
    for priority, p in priorities.items():
        lines.append(f"{priority:8} {p['started']:>7} {p['started_late']:>5} "
                     f"{format_seconds(p['queue_wait_p50']):>8} "
                     f"{format_seconds(p['queue_wait_p95']):>8}")
    return lines


def format_capacity(v: Verdict) -> list[str]:
    """Render a capacity verdict with its figures and one line per day."""
    t = v.thresholds
    names = "Mon Tue Wed Thu Fri Sat Sun".split()
    days = "Mon-Fri" if t.workdays == (0, 1, 2, 3, 4) else ",".join(names[i] for i in t.workdays)
    yes = {True: "met", False: "not met"}
    lines = [
        f"window        {format_seconds(v.window_end - v.window_start)} to "
        f"{_when(v.window_end)}; {v.slots_total} slots; working hours "
        f"{t.workday_start:%H:%M}-{t.workday_end:%H:%M} {t.tz} {days}",
        f"utilisation   above {t.util:.0%} on {v.busy_days} of {v.working_days} working days "
        f"({v.busy_day_share:.0%}; needs more than {t.day_share:.0%}): "
        f"{yes[v.utilisation_sustained]}",
        f"queue wait    above {format_seconds(t.wait_seconds)} for {v.slow_jobs} of {v.jobs} "
        f"jobs ({v.slow_job_share:.1%}; needs more than {t.slow_share:.0%}): "
        f"{yes[v.waits_long]}",
        f"verdict       {v.text}" + (": a second licence is warranted" if v.at_capacity else ""),
        "",
        f"{'DATE':10} {'DAY':3} {'UTIL':>6} {'JOBS':>6} {'SLOW':>6}",
    ]
    for d in v.days:
        util = "-" if d.utilisation is None else f"{d.utilisation:.0%}"
        if not d.data:
            lines.append(f"{d.date.isoformat():10} {d.date:%a}   no data yet")
            continue
        slow = "-" if d.slow_share is None else f"{d.slow_share:.0%}"
        mark = " *" if d.utilisation is not None and d.utilisation > t.util else ""
        lines.append(f"{d.date.isoformat():10} {d.date:%a} {util:>6} {d.jobs:>6} {slow:>6}{mark}")
    return lines
