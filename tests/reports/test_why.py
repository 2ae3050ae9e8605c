"""`imposer why`: every reason a job can be in, and the predicted start (injected clock)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import attrs
import pytest

from imposer.models import JobStatus, Received, TenantConfig
from imposer.models.urgency import format_due
from imposer.reports.formatting import format_seconds
from imposer.reports.why import explain, investigate, predict
from imposer.state.waiting import Parked
from tests.fixtures.aws import env_for
from tests.fixtures.jobs import record_of, request


def ask(backends, job_id, slots=None, tenant="acme", share=None):
    s = backends.settings
    if slots is not None:
        s = s.evolve(slots=slots)
    if record_of(backends, job_id) is None:
        return explain(job_id, None, [], {}, s.default_cap, [], [], s.slots, s,
                       backends.clock.time())
    tenant = record_of(backends, job_id).tenant_id
    return investigate(backends.jobs, backends.leases, backends.tenants, s, tenant, job_id,
                       backends.clock.time(), share=share)


def history(backends, tenant, seconds, count=5):
    """Finish *count* jobs of *tenant* that each ran *seconds*."""
    for _ in range(count):
        lease = backends.leases.acquire(request(tenant), "h", 0).lease
        backends.leases.release(lease, JobStatus.SUCCEEDED, run_seconds=seconds,
                                finished_at=backends.clock.time())


class TestReasons:
    def test_not_received(self, backends):
        """A job with no record has not been picked up yet."""
        answer = ask(backends, "never-seen")
        assert answer.code == "not_received" and "not yet received" in answer.reason

    def test_at_cap_names_holders_and_predicts(self, backends, clock):
        """A job at its tenant's cap names the jobs holding it and predicts from their run time."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=2))
        history(backends, "acme", 100)
        holders = [backends.leases.acquire(request(), "h", n).lease for n in range(2)]
        waiting = request()
        backends.jobs.note_waiting(waiting, clock.time(), "at tenant cap", deferred=True)
        clock.advance(30)
        answer = ask(backends, waiting.job_id)
        assert answer.code == "at_cap"
        assert {h["job_id"] for h in answer.holders} == {l.job_id for l in holders}
        assert "holds 2 of 2 slots" in answer.reason
        expected = clock.time() + 70 + backends.settings.defer_seconds / 2
        assert answer.predicted_start == pytest.approx(expected)
        assert answer.earliest <= answer.predicted_start <= answer.latest
        assert answer.confidence == "based on 5 finished job(s)"

    def test_second_in_line_waits_for_a_second_slot(self, backends, clock):
        """The job behind another waiting one is predicted to start one slot-turn later."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        history(backends, "acme", 100)
        backends.leases.acquire(request(), "h", 0)
        first, second = request(), request()
        backends.jobs.note_waiting(first, clock.time(), "at cap", deferred=True)
        clock.advance(1)
        backends.jobs.note_waiting(second, clock.time(), "at cap", deferred=True)
        answers = [ask(backends, r.job_id) for r in (first, second)]
        assert answers[1].predicted_start - answers[0].predicted_start == pytest.approx(100)

    def test_pool_full(self, backends, clock):
        """A tenant below its cap waits only because every slot is busy."""
        backends.leases.acquire(request("a"), "h", 0)
        backends.leases.acquire(request("b"), "h", 1)
        waiting = request("c")
        backends.jobs.note_waiting(waiting, clock.time(), "received")
        answer = ask(backends, waiting.job_id, slots=2)
        assert answer.code == "pool_full" and "all 2 slots are busy" in answer.reason
        assert answer.confidence == "no finished jobs yet to predict from"

    def test_licence_unavailable(self, backends, clock):
        """A pdfToolbox licence failure is reported as such, not as the tenant's failure."""
        req = request()
        lease = backends.leases.acquire(req, "h", 0).lease
        backends.leases.release(lease, JobStatus.RETRYING, run_seconds=2.0,
                                wait_reason="licence unavailable, retrying: exit code 100")
        answer = ask(backends, req.job_id)
        assert answer.code == "licence" and "exit 100" in answer.reason

    def test_retrying_after_failure(self, backends, clock):
        """A counted failure says which attempt failed and when the retry is due."""
        req = request()
        lease = backends.leases.acquire(req, "h", 0).lease
        backends.leases.release(lease, JobStatus.RETRYING, failures=1, run_seconds=5.0,
                                wait_reason="retrying after failure 1 of 3: boom")
        answer = ask(backends, req.job_id)
        assert answer.code == "retrying" and "failure 1 of 3" in answer.reason
        assert answer.predicted_start == pytest.approx(
            lease.acquired_at + 5.0 + backends.settings.retry_seconds)

    def test_dead_lettered(self, backends):
        """A dead job says how many attempts failed and why."""
        req = request()
        lease = backends.leases.acquire(req, "h", 0).lease
        backends.leases.release(lease, JobStatus.DEAD, failures=1, error="tool crashed")
        answer = ask(backends, req.job_id)
        assert answer.code == "dead" and "tool crashed" in answer.reason

    def test_running_and_done(self, backends, clock):
        """Running and finished jobs are described, not predicted."""
        req = request()
        lease = backends.leases.acquire(req, "hostX", 3).lease
        clock.advance(65)
        running = ask(backends, req.job_id)
        assert running.code == "running" and "host hostX slot 3 for 1m05s" in running.reason
        backends.leases.release(lease, JobStatus.SUCCEEDED)
        assert ask(backends, req.job_id).code == "succeeded"


class TestUrgency:
    """A job's priority and due time in the answer: who of its tenant goes first, and
    whether it will start in time (docs/priority.rst)."""

    @staticmethod
    def park(backends, clock, **urgency):
        """Park a job of acme now, as a worker at the cap would: its record and its note."""
        req = attrs.evolve(request(), submitted_at=clock.time(), **urgency)
        backends.jobs.note_waiting(req, clock.time(), "at tenant cap", deferred=True)
        message = Received(message_id=f"m-{req.job_id}", receipt="r", body=req.to_body(),
                           group_id="acme", sent_at=clock.time(), receive_count=1)
        backends.waiting.park(Parked.of(req, message, visible_at=clock.time() + 300))
        clock.advance(1)
        return req

    def ask(self, backends, req):
        return investigate(backends.jobs, backends.leases, backends.tenants,
                           backends.settings, "acme", req.job_id, backends.clock.time(),
                           waiting=backends.waiting)

    def test_a_job_behind_more_urgent_jobs_of_its_tenant_says_how_many(self, backends, clock):
        """Two rush jobs sent after a bulk job go before it: `why` says so and predicts the
        bulk job three slot-turns out, the first rush job one."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        history(backends, "acme", 100)
        backends.leases.acquire(request(), "h", 0)
        bulk = self.park(backends, clock)
        first, second = self.park(backends, clock, priority=0), self.park(backends, clock,
                                                                        priority=0)
        answers = {r.job_id: self.ask(backends, r) for r in (bulk, first, second)}
        assert "behind 2 more urgent job(s) of acme" in answers[bulk.job_id].reason
        assert "more urgent" not in answers[first.job_id].reason  # (the rush jobs are equal)
        assert "more urgent" not in answers[second.job_id].reason
        starts = [answers[r.job_id].predicted_start for r in (first, second, bulk)]
        assert starts[1] - starts[0] == pytest.approx(100)
        assert starts[2] - starts[1] == pytest.approx(100)

    def test_a_job_that_will_miss_its_due_time_says_so(self, backends, clock):
        """Due before its predicted start: `why` says by how much, and ``late`` is set."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        history(backends, "acme", 100)
        backends.leases.acquire(request(), "h", 0)
        soon = self.park(backends, clock, due=clock.time() + 40)
        later = self.park(backends, clock, due=clock.time() + 3600)
        answer = self.ask(backends, soon)
        missed = answer.predicted_start - soon.due
        assert answer.late is True and missed > 0
        assert f"will miss its due time {format_due(soon.due)}: predicted to start " \
               f"{format_seconds(missed)} after it" in answer.reason
        fine = self.ask(backends, later)
        assert fine.late is False and f"; due {format_due(later.due)}" in fine.reason
        assert "will miss" not in fine.reason

    def test_a_job_without_urgency_reads_as_before(self, backends, clock):
        """No priority, no due: no word of either, and its place is its age."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        history(backends, "acme", 100)
        backends.leases.acquire(request(), "h", 0)
        older, newer = self.park(backends, clock), self.park(backends, clock)
        a, b = self.ask(backends, older), self.ask(backends, newer)
        assert a.late is None and "due" not in a.reason and "urgent" not in a.reason
        assert b.predicted_start - a.predicted_start == pytest.approx(100)


class TestPredict:
    def test_overdue_holder_frees_now(self, backends, clock):
        """A holder already past the typical run time is expected to free its slot at once."""
        lease = backends.leases.acquire(request(), "h", 0).lease
        clock.advance(500)
        low, mid, high = predict([lease], 0, [100, 100, 100], clock.time())
        assert low == mid == high == clock.time()


class TestCommand:
    def test_why_json(self, settings, backends):
        """`imposer why --json` explains an unknown job as not received, and exits 1."""
        got = subprocess.run([sys.executable, "-m", "imposer", "why", "no-such-job", "--json"],
                             env=env_for(settings), capture_output=True, text=True)
        assert got.returncode == 1, got.stderr
        assert json.loads(got.stdout)["code"] == "not_received"

    def test_why_finds_the_tenant_by_job_id(self, settings, backends):
        """Given only a job id, `why` finds its tenant; with --tenant it reads that tenant's."""
        lease = backends.leases.acquire(request("globex"), "h", 0).lease
        for extra in ([], ["--tenant", "globex"]):
            got = subprocess.run([sys.executable, "-m", "imposer", "why", lease.job_id, "--json",
                                  *extra], env=env_for(settings), capture_output=True, text=True)
            assert got.returncode == 0, got.stderr
            answer = json.loads(got.stdout)
            assert (answer["code"], answer["tenant_id"]) == ("running", "globex")

    def test_the_command_says_what_goes_before_and_what_will_be_late(self, settings):
        """What a person reads: `imposer why` on a bulk job behind two rush jobs of its
        tenant, and on a job that will miss its due time (text and --json, exit 0)."""
        from imposer.clock import ManualClock
        from imposer.worker.wiring import connect

        clock = ManualClock(time.time())  # the command reads the wall clock
        backends = connect(settings, clock=clock)
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        history(backends, "acme", 100)
        backends.leases.acquire(request(), "h", 0)
        bulk = TestUrgency.park(backends, clock)
        for _ in range(2):
            TestUrgency.park(backends, clock, priority=0)
        soon = TestUrgency.park(backends, clock, priority=0, due=clock.time() + 40)

        def why(req, *args):
            got = subprocess.run([sys.executable, "-m", "imposer", "why", req.job_id, *args],
                                 env=env_for(settings), capture_output=True, text=True,
                                 timeout=120)
            assert got.returncode == 0, got.stderr
            return got.stdout

        assert "behind 3 more urgent job(s) of acme" in why(bulk)
        text = why(soon)
        assert f"will miss its due time {format_due(soon.due)}: predicted to start " in text
        assert "more urgent" not in text  # (due first among the rush jobs)
        answer = json.loads(why(soon, "--json"))
        assert (answer["code"], answer["late"]) == ("at_cap", True)
        assert json.loads(why(bulk, "--json"))["late"] is None

    def test_why_refuses_a_bad_id(self, settings):
        """An id that cannot exist is a usage error, before any AWS call."""
        got = subprocess.run([sys.executable, "-m", "imposer", "why", "bad id!"],
                             env=env_for(settings), capture_output=True, text=True)
        assert got.returncode == 2 and "is not an id" in got.stderr


class TestFairShare:
    def test_why_says_a_held_jobs_usage_share_and_effective_cap(self, settings, backends):
        """Fair share on: a waiting job of a tenant that used 90 s against another's 10 s
        is explained with its part of the licence time, its share and the effective cap its
        share allows (half of 8 slots: 4), in words and in --json."""
        from imposer.worker.wiring import connect

        shared = connect(settings.evolve(share_half_life=3600.0))
        for tenant, seconds in (("heavy", 90.0), ("light", 10.0)):
            lease = shared.leases.acquire(request(tenant), "h", 0).lease
            shared.leases.release(lease, JobStatus.SUCCEEDED,
                                  finished_at=lease.acquired_at + seconds)
        held = request("heavy")
        shared.jobs.note_waiting(held, time.time(), "held by fair share: heavy is above its "
                                 "weighted share of recent licence time, and light is further "
                                 "below its own")
        env = {**env_for(settings), "IMPOSER_SHARE_HALF_LIFE": "3600"}
        got = subprocess.run([sys.executable, "-m", "imposer", "why", held.job_id, "--json"],
                             env=env, capture_output=True, text=True)
        assert got.returncode == 0, got.stderr
        share = json.loads(got.stdout)["fair_share"]
        assert share["used"] == pytest.approx(0.9, abs=0.01)
        assert (share["share"], share["cap"], share["effective_cap"]) == (0.5, 4, 4)
        text = subprocess.run([sys.executable, "-m", "imposer", "why", held.job_id], env=env,
                              capture_output=True, text=True).stdout
        assert "held by fair share" in text and "against a share of 50.0%" in text
        shared.leases.acquire(request("light"), "h", 1)  # a slot busy: the turns are counted
        got = subprocess.run([sys.executable, "-m", "imposer", "why", held.job_id, "--json"],
                             env=env, capture_output=True, text=True)
        assert "about one freed slot in 2 goes to heavy while others wait" in \
            json.loads(got.stdout)["reason"], got.stdout


class TestFairSharePrediction:
    def full_pool(self, backends, clock):
        """Four slots busy with others' jobs started 0-3 s ago (c ran 10 s jobs before):
        they free 7, 8, 9 and 10 s from now; c's job waits."""
        history(backends, "c", 10.0)
        for i, tenant in enumerate("abab"):
            backends.leases.acquire(request(tenant), "h", i)
            clock.advance(1)
        clock.advance(-1)
        waiting = request("c")
        backends.jobs.note_waiting(waiting, clock.time(), "received")
        return waiting

    def test_behind_a_full_pool_a_share_of_a_quarter_starts_with_the_fourth_slot_freed(
            self, backends, clock):
        """Fair share on, c's share a quarter: about one freed slot in 4 is c's, so its job
        (none of c's ahead) starts with the 4th slot to free, 10 s from now; without fair
        share, the 1st, 7 s from now."""
        waiting = self.full_pool(backends, clock)
        shared = ask(backends, waiting.job_id, slots=4, share=0.25)
        assert shared.code == "pool_full"
        assert "about one freed slot in 4 goes to c while others wait" in shared.reason
        assert shared.predicted_start == pytest.approx(clock.time() + 10.0)
        caps = ask(backends, waiting.job_id, slots=4)
        assert caps.predicted_start == pytest.approx(clock.time() + 7.0)

    def test_a_held_job_with_its_tenants_jobs_ahead_waits_for_their_turns_too(
            self, backends, clock):
        """Held by fair share with one of c's jobs ahead, share a half, a slot free: its
        job comes with the 4th slot to free (two turns of c, one in two slots each); the
        reason is the hold's."""
        history(backends, "c", 10.0)
        for i, tenant in enumerate("aba"):
            backends.leases.acquire(request(tenant), "h", i)
            clock.advance(1)
        clock.advance(-1)
        first, waiting = request("c"), request("c")
        backends.jobs.note_waiting(first, clock.time() - 5, "held by fair share: c is above")
        backends.jobs.note_waiting(waiting, clock.time(), "held by fair share: c is above")
        answer = ask(backends, waiting.job_id, slots=4, share=0.5)
        assert answer.code == "queued" and answer.reason.startswith("held by fair share")
        # frees at +8, +9, +10, then the first slot again at +18: the 4th
        assert answer.predicted_start == pytest.approx(clock.time() + 18.0)
