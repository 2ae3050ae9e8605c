"""The loop's own duties, beside the roles it calls: never run unsupervised."""

from __future__ import annotations

import pytest

from imposer.models.exits import Exit
from imposer.worker.threads.periodic import Periodic
from tests.fixtures.parents import hand_driven
from tests.fixtures.workers import Worker

#: Put on a worker's PYTHONPATH as sitecustomize: its sweep thread's first pass ends the
#: thread (as a BaseException past Periodic's guard would).
SWEEP_DIES = """
from imposer.worker.threads import periodic

_run = periodic.Periodic.run


def run(self):
    if self.name == "sweep":
        raise SystemExit("injected: the sweep thread's pass ended it")
    return _run(self)


periodic.Periodic.run = run
"""


class TestHealth:
    @pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
    def test_a_side_thread_that_died_stops_the_worker_with_exit_5(self, settings, tmp_path,
                                                                  logged):
        """A side thread that is gone (its body raised past Periodic's guard) stops the
        worker fast with exit code 5 and one CRITICAL thread_died line naming the thread."""
        def body():
            raise SystemExit("the pass ended the thread")

        alive, dying = Periodic("rollups", 60, lambda: None), Periodic("sweep", 0.01, body)
        supervisor, _, _ = hand_driven(settings, tmp_path)
        try:
            alive.start()
            dying.start()
            dying.join(60)
            assert not dying.is_alive()
            supervisor.threads[:] = [alive]  # (not booted: the threads it built never ran)
            supervisor.check_health()
            assert supervisor.exit_code == Exit.OK and not supervisor.fast.is_set()
            supervisor.threads.append(dying)
            supervisor.check_health()
            assert supervisor.exit_code == Exit.THREAD_DIED == 5
            assert supervisor.fast.is_set()
            (line,) = [r for r in logged() if r["action"] == "thread_died"]
            assert (line["level"], line["thread_name"]) == ("CRITICAL", "sweep")
        finally:
            alive.stop()
            supervisor.pool.stop(timeout=0)

    def test_the_receivers_thread_is_watched_once_started(self, settings, tmp_path, logged):
        """The intake's receiver is checked beside the side threads once it was started:
        one that ended stops the worker with exit 5, naming ``receiver``."""
        supervisor, _, _ = hand_driven(settings, tmp_path)
        try:
            supervisor.threads[:] = []
            supervisor.check_health()
            assert supervisor.exit_code == Exit.OK, "a receiver never started is not gone"
            supervisor.receiver.start()
            assert supervisor.receiver.stop(30) == [] and not supervisor.receiver.is_alive()
            supervisor.check_health()
            assert (supervisor.exit_code, supervisor.fast.is_set()) == (Exit.THREAD_DIED, True)
            (line,) = [r for r in logged() if r["action"] == "thread_died"]
            assert line["thread_name"] == "receiver"
        finally:
            supervisor.pool.stop(timeout=0)


@pytest.mark.slow
class TestExitStatus:
    def test_imposer_run_exits_5_when_a_side_thread_dies(self, settings, tmp_path):
        """The real process, as systemd sees it: `imposer run` whose sweep thread dies
        stops by itself with exit status 5 and one CRITICAL thread_died line on its log
        naming the thread (the death injected by a sitecustomize on its PYTHONPATH)."""
        inject = tmp_path / "inject"
        inject.mkdir()
        (inject / "sitecustomize.py").write_text(SWEEP_DIES)
        worker = Worker(settings, tmp_path, "dies", env={"PYTHONPATH": str(inject)})
        try:
            assert worker.wait(120) == Exit.THREAD_DIED == 5, worker.tail()
            (line,) = worker.actions("thread_died")
            assert (line["level"], line["thread_name"]) == ("CRITICAL", "sweep")
        finally:
            worker.close()
