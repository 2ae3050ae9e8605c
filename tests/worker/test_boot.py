"""The boot's patience: AWS errors that may pass are retried, configuration is not."""

from __future__ import annotations

import threading

import pytest

from imposer.clock import ManualClock
from imposer.errors import ConfigError, MissingResource, TransientBackendError
from imposer.worker.boot import Patience, StoppedWhileBooting


class Flaky:
    """Raise each of *errors* in turn, then return "up"; the clock moves on every call."""

    def __init__(self, clock: ManualClock, *errors: Exception, step: float = 1.0) -> None:
        self.clock, self.errors, self.step, self.calls = clock, list(errors), step, 0

    def __call__(self) -> str:
        self.calls += 1
        self.clock.advance(self.step)
        if self.errors:
            raise self.errors.pop(0)
        return "up"


def patience(seconds: float = 120.0):
    clock, drain, fast = ManualClock(), threading.Event(), threading.Event()
    return Patience(seconds, clock, drain, fast), clock, drain, fast


class TestPatience:
    def test_an_aws_error_that_may_pass_is_retried(self):
        """Two throttled calls, then the step succeeds and its value is returned."""
        patiently, clock, _, _ = patience()
        call = Flaky(clock, TransientBackendError("throttled"), TransientBackendError("again"))
        assert patiently("boot", call) == "up" and call.calls == 3

    def test_configuration_is_not_retried(self):
        """A missing table or a bad setting ends the boot at the first call."""
        for error in (MissingResource("table t does not exist"), ConfigError("no region")):
            patiently, clock, _, _ = patience()
            call = Flaky(clock, error)
            with pytest.raises(type(error)):
                patiently("boot", call)
            assert call.calls == 1

    def test_the_deadline_ends_the_retries(self):
        """Past the boot deadline the AWS error is raised, not retried for ever."""
        patiently, clock, _, _ = patience(seconds=2.0)
        call = Flaky(clock, *[TransientBackendError("down")] * 10, step=1.5)
        with pytest.raises(TransientBackendError):
            patiently("boot", call)
        assert call.calls == 2

    def test_a_stop_signal_ends_the_retries_cleanly(self):
        """With a drain (or a fast stop) requested, the boot stops instead of waiting for AWS."""
        for flag in ("drain", "fast"):
            patiently, clock, drain, fast = patience()
            {"drain": drain, "fast": fast}[flag].set()
            call = Flaky(clock, TransientBackendError("down"))
            with pytest.raises(StoppedWhileBooting, match="boot: down"):
                patiently("boot", call)
            assert call.calls == 1
