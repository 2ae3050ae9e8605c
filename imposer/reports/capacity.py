"""The seed's licence rule: is the pool at capacity, or was that a transient burst?

Slot utilisation above 80% sustained on more than half of working days,
combined with queue wait above 3 minutes on more than 20% of jobs over a
four-week window, says a second licence is warranted. Either condition
alone is usually a burst, and a licence takes 48 hours to procure, so the
verdict names which condition holds rather than crying wolf.
"""

from __future__ import annotations

import collections
import datetime
from typing import Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from imposer.errors import ConfigError
from imposer.metrics import Metrics
from imposer.models import JobRecord
from imposer.reports.history import HOUR, HostHour, hosts_seen, slow_count
from imposer.reports.stats import busy_span, queue_wait

DAY = 86400.0


@attrs.frozen(kw_only=True)
class Thresholds:
    """Every number of the licence rule, with the seed's values."""

    #: Length of the window ending now, seconds.
    window_seconds: float = 28 * DAY
    #: A working day is busy when its slot utilisation is above this (0-1).
    util: float = 0.8
    #: Utilisation is sustained when busy days are more than this share of working days.
    day_share: float = 0.5
    #: A job is slow when its queue wait is above this many seconds.
    wait_seconds: float = 180.0
    #: Waits are long when slow jobs are more than this share of jobs started.
    slow_share: float = 0.2
    #: Working hours, local to ``tz``.
    workday_start: datetime.time = datetime.time(8)
    workday_end: datetime.time = datetime.time(18)
    #: Working weekdays (Monday is 0).
    workdays: tuple[int, ...] = (0, 1, 2, 3, 4)
    #: IANA time zone name of the working hours.
    tz: str = "UTC"

    def __attrs_post_init__(self) -> None:
        for name in ("util", "day_share", "slow_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name} must be a share between 0 and 1")
        if self.window_seconds <= 0 or self.wait_seconds < 0:
            raise ConfigError("window must be positive and the wait threshold not negative")
        if self.workday_end <= self.workday_start:
            raise ConfigError("working hours must end after they start")
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown time zone {self.tz!r}") from None


@attrs.frozen(kw_only=True)
class Day:
    """One calendar day of the window, for the verdict and the chart."""

    date: datetime.date
    #: Counted for utilisation: a working weekday whose hours lie wholly in the window.
    working: bool
    #: Busy slot-seconds in working hours over slot-seconds of those hours; None if not counted.
    utilisation: float | None
    #: Jobs that acquired a slot that day (any hour), and those that waited too long.
    jobs: int
    slow_jobs: int
    #: False for days before imposer recorded anything: they count neither way.
    data: bool = True

    @property
    def slow_share(self) -> float | None:
        return self.slow_jobs / self.jobs if self.jobs else None


def _calendar(now: float, t: Thresholds) -> tuple[list[datetime.date], dict]:
    """Return the window's dates and the working hours of each counted working day."""
    tz = ZoneInfo(t.tz)
    start = now - t.window_seconds
    first = datetime.datetime.fromtimestamp(start, tz).date()
    count = (datetime.datetime.fromtimestamp(now, tz).date() - first).days + 1
    dates = [first + datetime.timedelta(days=i) for i in range(count)]
    hours = {}
    for d in dates:
        lo = datetime.datetime.combine(d, t.workday_start, tz).timestamp()
        hi = datetime.datetime.combine(d, t.workday_end, tz).timestamp()
        if d.weekday() in t.workdays and lo >= start and hi <= now:
            hours[d] = (lo, hi)
    return dates, hours


def daily(records: Sequence[JobRecord], *, slots_total: int, now: float,
          thresholds: Thresholds = Thresholds()) -> list[Day]:
    """Return every calendar day of the window with its utilisation and slow-job count."""
    t, tz = thresholds, ZoneInfo(thresholds.tz)
    start = now - t.window_seconds
    dates, hours = _calendar(now, t)
    busy: dict[datetime.date, float] = collections.defaultdict(float)
    jobs: collections.Counter = collections.Counter()
    slow: collections.Counter = collections.Counter()
    for r in records:
        span = busy_span(r, now)
        if span is None or span[1] < start:
            continue
        day = datetime.datetime.fromtimestamp(span[0], tz).date()
        while day <= dates[-1] and day <= datetime.datetime.fromtimestamp(span[1], tz).date():
            if day in hours:  # a span may cross midnight: credit each day its own part
                lo, hi = hours[day]
                busy[day] += max(0.0, min(span[1], hi) - max(span[0], lo))
            day += datetime.timedelta(days=1)
        wait = queue_wait(r)
        if start <= span[0] <= now and wait is not None:
            day = datetime.datetime.fromtimestamp(span[0], tz).date()
            jobs[day] += 1
            slow[day] += wait > t.wait_seconds
    return [Day(date=d, working=d in hours, jobs=jobs[d], slow_jobs=slow[d],
                utilisation=busy[d] / (slots_total * (hours[d][1] - hours[d][0]))
                if d in hours else None)
            for d in dates]


@attrs.frozen(kw_only=True)
class Verdict:
    """The licence rule applied to one window, with the figures behind it."""

    thresholds: Thresholds
    window_start: float
    window_end: float
    slots_total: int
    days: tuple[Day, ...]
    #: Working days counted, and those with utilisation above the threshold.
    working_days: int
    busy_days: int
    #: True when busy days are more than ``day_share`` of working days.
    utilisation_sustained: bool
    #: Jobs that acquired a slot in the window, and those whose wait was above the threshold.
    jobs: int
    slow_jobs: int
    #: True when slow jobs are more than ``slow_share`` of jobs.
    waits_long: bool
    at_capacity: bool
    #: "at capacity", "likely a transient burst: <which>" or "within capacity".
    text: str

    @property
    def busy_day_share(self) -> float:
        return self.busy_days / self.working_days if self.working_days else 0.0

    @property
    def slow_job_share(self) -> float:
        return self.slow_jobs / self.jobs if self.jobs else 0.0

    def to_dict(self) -> dict:
        """Return the verdict as a JSON-ready dict."""
        data = attrs.asdict(self, recurse=False, filter=lambda a, _: a.name not in
                            ("thresholds", "days"))
        data["thresholds"] = {k: v.isoformat() if isinstance(v, datetime.time) else v
                              for k, v in attrs.asdict(self.thresholds).items()}
        data.update(busy_day_share=round(self.busy_day_share, 4),
                    slow_job_share=round(self.slow_job_share, 4))
        data["days"] = [{"date": d.date.isoformat(), "working": d.working,
                         "utilisation": None if d.utilisation is None else round(d.utilisation, 4),
                         "jobs": d.jobs, "slow_jobs": d.slow_jobs} for d in self.days]
        return data


def evaluate(records: Sequence[JobRecord], *, slots_total: int, now: float,
             thresholds: Thresholds = Thresholds()) -> Verdict:
    """Apply the licence rule to job records of the window ending at *now*."""
    days = daily(records, slots_total=slots_total, now=now, thresholds=thresholds)
    return judge(days, slots_total=slots_total, now=now, thresholds=thresholds)


def evaluate_hours(rows: Sequence[HostHour], *, now: float,
                   thresholds: Thresholds = Thresholds()) -> Verdict:
    """Apply the licence rule to the rollups (host-hours) of the window ending at *now*."""
    start = now - thresholds.window_seconds
    seen = hosts_seen(r for r in rows if start - HOUR < r.hour < now)
    slots_total = sum(seen.values())
    days = daily_hours(rows, slots_total=slots_total, now=now, thresholds=thresholds)
    first = min((r.hour for r in rows), default=None)
    tz = ZoneInfo(thresholds.tz)
    days = [d if first is not None and d.date >= datetime.datetime.fromtimestamp(first, tz).date()
            else attrs.evolve(d, working=False, utilisation=None, data=False) for d in days]
    return judge(days, slots_total=slots_total, now=now, thresholds=thresholds)


def daily_hours(rows: Sequence[HostHour], *, slots_total: int, now: float,
                thresholds: Thresholds = Thresholds()) -> list[Day]:
    """Return every day of the window from host-hours: the rollups' version of ``daily``.

    An hour's busy time is spread evenly over the hour, so working hours that
    do not start on the hour are credited their share; slow jobs are counted
    from the wait histogram (exact at its bucket edges, 180 s among them).
    """
    t, tz = thresholds, ZoneInfo(thresholds.tz)
    dates, hours = _calendar(now, t)
    start = now - t.window_seconds
    busy: dict[datetime.date, float] = collections.defaultdict(float)
    jobs: collections.Counter = collections.Counter()
    slow: collections.Counter = collections.Counter()
    for row in rows:
        if row.hour + HOUR <= start or row.hour >= now:
            continue
        day = datetime.datetime.fromtimestamp(row.hour, tz).date()
        if row.busy and day in hours:
            lo, hi = hours[day]
            overlap = max(0.0, min(row.hour + HOUR, hi, now) - max(row.hour, lo))
            busy[day] += row.busy * overlap / HOUR
        if row.hour >= start:
            jobs[day] += row.started
            slow[day] += slow_count(row.waits, t.wait_seconds)
    return [Day(date=d, working=d in hours, jobs=jobs[d], slow_jobs=slow[d],
                utilisation=(busy[d] / (slots_total * (hours[d][1] - hours[d][0]))
                             if slots_total else 0.0) if d in hours else None)
            for d in dates]


def judge(days: Sequence[Day], *, slots_total: int, now: float,
          thresholds: Thresholds) -> Verdict:
    """Apply the rule to the days: both conditions at once, or name the one that holds."""
    t = thresholds
    working = [d for d in days if d.working]
    busy_days = sum(1 for d in working if d.utilisation > t.util)
    jobs = sum(d.jobs for d in days)
    slow = sum(d.slow_jobs for d in days)
    # "More than": a small tolerance keeps 57 of 100 above 0.57 despite float rounding.
    sustained = bool(working) and busy_days > t.day_share * len(working) + 1e-9
    waits_long = jobs > 0 and slow > t.slow_share * jobs + 1e-9
    if not working and not jobs:
        text = "not enough data: no working day of the window has records yet"
    elif sustained and waits_long:
        text = "at capacity"
    elif sustained or waits_long:
        text = "likely a transient burst: " + ("slot utilisation" if sustained else "queue wait")
    else:
        text = "within capacity"
    return Verdict(thresholds=t, window_start=now - t.window_seconds, window_end=now,
                   slots_total=slots_total, days=tuple(days), working_days=len(working),
                   busy_days=busy_days, utilisation_sustained=sustained, jobs=jobs,
                   slow_jobs=slow, waits_long=waits_long, at_capacity=sustained and waits_long,
                   text=text)


def emit(verdict: Verdict, metrics: Metrics) -> None:
    """Write the verdict as metrics, so CloudWatch shows the licence rule as this computes it.

    Shares are percent of the window (the whole four weeks), at capacity is 1 or 0;
    imposer-capacity.timer runs ``imposer capacity --emit`` every hour.
    """
    metrics.emit("licence_busy_days", round(100 * verdict.busy_day_share, 2))
    metrics.emit("licence_slow_jobs", round(100 * verdict.slow_job_share, 2))
    metrics.emit("licence_at_capacity", int(verdict.at_capacity))


def chart(source: Verdict | Sequence[Day], path: str,
          thresholds: Thresholds | None = None) -> None:
    """Draw daily utilisation and slow-job share against their thresholds into *path*."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        raise ConfigError("charts need matplotlib: pip install 'imposer[chart]'") from None
    days = source.days if isinstance(source, Verdict) else tuple(source)
    t = thresholds or (source.thresholds if isinstance(source, Verdict) else Thresholds())
    labels = [d.date.strftime("%a %d %b") for d in days]
    fig, (top, bottom) = pyplot.subplots(2, 1, sharex=True, figsize=(max(6, len(days) * 0.4), 6))
    top.bar(labels, [100 * (d.utilisation or 0) for d in days],
            color=["lightgrey" if not d.working else "tab:red" if d.utilisation > t.util
                   else "tab:blue" for d in days])
    top.axhline(100 * t.util, color="black", linestyle="--", label=f"{t.util:.0%} threshold")
    top.set_ylabel("slot utilisation,\nworking hours (%)")
    bottom.bar(labels, [100 * (d.slow_share or 0) for d in days], color="tab:orange")
    bottom.axhline(100 * t.slow_share, color="black", linestyle="--",
                   label=f"{t.slow_share:.0%} of jobs")
    bottom.set_ylabel(f"jobs that waited\nover {t.wait_seconds:g} s (%)")
    bottom.tick_params(axis="x", labelrotation=90)
    for axes in (top, bottom):
        axes.set_ylim(0, 115)
        axes.legend(loc="upper right", fontsize="small")
    if isinstance(source, Verdict):
        fig.suptitle(f"imposer capacity: {source.text}")
        top.set_title(f"{source.busy_days} of {source.working_days} working days above "
                      f"{t.util:.0%} (needs more than {t.day_share:.0%})", fontsize="medium")
        bottom.set_title(f"{source.slow_jobs} of {source.jobs} jobs waited too long "
                         f"(needs more than {t.slow_share:.0%})", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path)
    pyplot.close(fig)
