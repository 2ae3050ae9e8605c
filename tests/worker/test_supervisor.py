"""The loop's own duties, beside the roles it calls: never run unsupervised."""

from __future__ import annotations

from imposer.models.exits import Exit
from imposer.worker.threads.periodic import Periodic
from tests.fixtures.parents import hand_driven


class TestHealth:
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
