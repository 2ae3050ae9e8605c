"""When the worker stops by itself (``imposer run --max-jobs N --exit-when-idle``), on plain
values: ``supervisor.Until``."""

from __future__ import annotations

from imposer.worker.supervisor import Until


def never_asked() -> bool:
    raise AssertionError("the idle check (which may ask AWS) was called")


class TestUntil:
    def test_by_default_it_serves_until_told(self):
        until = Until()
        assert until.left(10_000) is None
        assert not until.reached(10_000, 0, lambda: True)

    def test_max_jobs_counts_down_and_is_reached_at_n(self):
        until = Until(max_jobs=3)
        assert [until.left(n) for n in (0, 2, 3)] == [3, 1, 0]
        assert not until.reached(2, 1, never_asked)
        assert until.reached(3, 1, never_asked), "reached while the last jobs still run"

    def test_idle_is_asked_only_when_nothing_runs(self):
        """The queue is asked (``Intake.idle``) only with nothing running: a busy host
        costs no call."""
        until = Until(idle=True)
        assert not until.reached(5, 2, never_asked)
        assert until.reached(5, 0, lambda: True)
        assert not until.reached(5, 0, lambda: False)

    def test_idle_off_never_asks(self):
        assert not Until(max_jobs=9).reached(5, 0, never_asked)
