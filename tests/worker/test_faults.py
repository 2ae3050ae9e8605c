"""Faults the worker must ride out with nothing duplicated or dropped (issue 12's cases).

In-process tests drive one Supervisor by hand for the races (a result in the
pipe at an overrun or a fast stop); subprocess tests kill and freeze real
hosts and pool children.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import boto3
import psutil
import pytest

from imposer.aws.s3 import EPOCH_META
from imposer.child import cleanup
from imposer.client.submit import submit
from imposer.models import JobStatus, S3Uri, TenantConfig
from imposer.state.jobs import dead_letter_claim
from imposer.state.outbox import event_id
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.parents import hand_driven
from tests.fixtures.jobs import record_of
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import Worker, layout, submit_jobs, wait_for
from tests.fixtures.workers import workers  # noqa: F401 (fixture)


def tool_processes(job_id: str) -> list[psutil.Process]:
    """The fake tool's processes (and helpers it spawned) working on *job_id*."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(job_id in part for part in (proc.info["cmdline"] or [])) \
                and proc.status() != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def gone(process: psutil.Process) -> bool:
    """Tell whether *process* died: reaped, or a zombie waiting for its reaper."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True  # reaped between the two looks


@pytest.fixture
def by_hand(settings, tmp_path):
    supervisor, backends, clock = hand_driven(settings, tmp_path)
    yield supervisor, backends, clock
    supervisor.pool.stop(timeout=0)


@pytest.fixture
def by_hand_behind_proxy(settings, tmp_path, monkeypatch):
    """`by_hand` whose parent's AWS calls pass through a fault proxy, and the proxy."""
    proxy = FaultProxy(os.environ["AWS_ENDPOINT_URL"], "by-hand").start()
    supervisor, backends, clock = hand_driven(settings, tmp_path, proxy.url, monkeypatch)
    yield supervisor, backends, clock, proxy
    supervisor.pool.stop(timeout=0)
    proxy.stop()


def start_one(supervisor, settings, tmp_path, **variables) -> str:
    job = submit_jobs(settings, tmp_path, "acme", 1, layout(**variables))[0]
    wait_for(lambda: (supervisor.fill_free_slots(), len(supervisor.running))[1] == 1, 30,
             "the job to start")
    wait_for(lambda: supervisor.pool.has_result(0), 60, "the child's result in the pipe")
    return job


class TestResultsAreNeverThrownAway:
    def test_overrun_check_collects_a_waiting_result(self, by_hand, settings, tmp_path):
        """A job past its limit whose result already waits is settled, not killed and retried."""
        supervisor, backends, clock = by_hand
        job = start_one(supervisor, settings, tmp_path)
        clock.advance(supervisor.reaper.overrun.limit + 1)
        supervisor.check_overruns()
        assert supervisor.pool.has_result(0), "the result was thrown away with a kill"
        supervisor.collect_finished(wait=0)
        supervisor.settle_finished()
        record = record_of(backends, job)
        assert (record.status, record.attempts, record.failures) == (JobStatus.SUCCEEDED, 1, 0)

    def test_fast_stop_settles_a_finished_job(self, by_hand, settings, tmp_path):
        """A second SIGTERM right after a job finished settles it instead of returning it."""
        supervisor, backends, _ = by_hand
        job = start_one(supervisor, settings, tmp_path)
        supervisor.fast.set()
        supervisor.shutdown()
        assert record_of(backends, job).status == JobStatus.SUCCEEDED
        depth = backends.queue.depth()
        assert depth["visible"] + depth["in_flight"] == 0, "the message was returned to run again"


class TestDeadChildren:
    def test_a_job_for_a_child_that_died_idle_goes_to_a_fresh_one(self, by_hand, settings,
                                                                  tmp_path, caplog):
        """A job sent to a slot whose child died while idle runs in a fresh child: no broken
        pipe, no handler error, no failure counted."""
        supervisor, backends, _ = by_hand
        idle = psutil.Process(supervisor.pool.slots[0].process.pid)
        idle.kill()
        wait_for(lambda: gone(idle), 30, "the idle child to die")
        job = start_one(supervisor, settings, tmp_path)
        supervisor.collect_finished(wait=0)
        supervisor.settle_finished()
        record = record_of(backends, job)
        assert (record.status, record.attempts, record.failures) == (JobStatus.SUCCEEDED, 1, 0)
        actions = [getattr(r, "action", None) for r in caplog.records]
        assert "idle_child_replaced" in actions and "handler_error" not in actions


class TestLostReplies:
    def test_a_release_whose_reply_was_lost_still_promotes_its_plate(
            self, by_hand_behind_proxy, settings, tmp_path, caplog):
        """A release that committed but whose every reply was lost is found in the job record
        on the next try: the plate is promoted and the message deleted, nothing discarded."""
        supervisor, backends, clock, proxy = by_hand_behind_proxy
        job = start_one(supervisor, settings, tmp_path)
        supervisor.collect_finished(wait=0)
        proxy.inject("drop_reply", 600, service="dynamodb", operation="TransactWriteItems")
        supervisor.settle_finished()  # commits; botocore's tries all lose their replies
        assert len(supervisor.running) == 1, "the job left before its release was known done"
        record = record_of(backends, job)
        assert record.status == JobStatus.SUCCEEDED, "the release did not commit"
        proxy.clear()
        supervisor.settle_finished(force=True)  # refused (the lease is gone): ours took it
        assert not len(supervisor.running)
        s3 = boto3.client("s3")
        output = S3Uri.parse(record.output)
        head = s3.head_object(Bucket=output.bucket, Key=output.key)
        assert head["Metadata"][EPOCH_META] == record.output_epoch
        depth = backends.queue.depth()
        assert depth["visible"] + depth["in_flight"] == 0, "the message was not deleted"
        actions = [getattr(r, "action", None) for r in caplog.records]
        assert "release_reply_lost" in actions and "lease_lost" not in actions
        assert backends.leases.counters()["acme"].inflight == 0


@pytest.fixture
def dying_behind_proxy(settings, tmp_path, monkeypatch):
    """`by_hand_behind_proxy` whose jobs die at their first counted failure."""
    proxy = FaultProxy(os.environ["AWS_ENDPOINT_URL"], "dying").start()
    supervisor, backends, clock = hand_driven(settings.evolve(max_attempts=1), tmp_path,
                                              proxy.url, monkeypatch)
    yield supervisor, backends, clock, proxy
    supervisor.pool.stop(timeout=0)
    proxy.stop()


def start_dying(supervisor, backends, settings, tmp_path) -> str:
    """Start one job (with a webhook) whose tool fails; return its id once its result waits."""
    backends.tenants.put(TenantConfig(tenant_id="acme", webhook_secret="whsec_" + "x" * 32,
                                      webhook_hosts=("127.0.0.1",)))
    numbered_pdf(tmp_path / "art.pdf", 2)
    job = submit("acme", tmp_path / "art.pdf", layout(fake_exit=103), bucket=settings.bucket,
                 queue=settings.queue_name, webhook="http://127.0.0.1:9/hook").job_id
    wait_for(lambda: (supervisor.fill_free_slots(), len(supervisor.running))[1] == 1, 30,
             "the job to start")
    wait_for(lambda: supervisor.pool.has_result(0), 60, "the child's result in the pipe")
    return job


def settle_dying(dying_behind_proxy, settings, tmp_path, fault: str) -> str:
    """Run a dying job and settle it while every SQS SendMessage meets *fault*; its id."""
    supervisor, backends, _, proxy = dying_behind_proxy
    job = start_dying(supervisor, backends, settings, tmp_path)
    supervisor.collect_finished(wait=0)
    proxy.inject(fault, 600, service="sqs", operation="SendMessage")
    supervisor.settle_finished()
    proxy.clear()
    return job


def dead_letters(settings) -> list[dict[str, str]]:
    """The message attributes of every message in the DLQ (each read once)."""
    sqs = boto3.client("sqs")
    url = sqs.get_queue_url(QueueName=settings.dlq_name)["QueueUrl"]
    out = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                     VisibilityTimeout=60,
                                     MessageAttributeNames=["All"]).get("Messages", []):
        out.extend({k: v["StringValue"] for k, v in m["MessageAttributes"].items()} for m in got)
    return out


def assert_one_fate(backends, settings, job: str) -> None:
    """*job* is dead with one DLQ message naming it and one completion event, its message gone."""
    record = record_of(backends, job)
    assert record.status == JobStatus.DEAD
    letters = dead_letters(settings)
    assert [(d["imposer_job_id"], d["imposer_epoch"], d["imposer_dead_letter_id"])
            for d in letters] == [(record.key, record.epoch, f"{record.key}/{record.epoch}")]
    events = [e.event_id for e in backends.outbox.listed() if e.job_id == job]
    assert events == [record.webhook_event] == [event_id("acme", job, record.epoch)]
    depth = backends.queue.depth()
    assert depth["visible"] + depth["in_flight"] == 0, "the job's message was not deleted"


def returned_and_settled(supervisor, backends, clock, settings) -> None:
    """Age every dead-letter claim past a lease TTL, then let the job's message come back
    (it was kept back that long) and be settled."""
    clock.advance(settings.lease_ttl_seconds + 1)
    wait_for(lambda: (supervisor.fill_free_slots(),
                      sum(backends.queue.depth().values()))[1] == 0, 60,
             "the returning message to be settled")


class TestOneDeadLetter:
    def test_a_dead_letter_send_that_never_reached_sqs_is_sent_when_its_message_returns(
            self, dying_behind_proxy, settings, tmp_path, caplog):
        """A DLQ send whose connection dropped before SQS had it (the worker cannot tell a
        lost reply) is not retried at once, but its message is kept and its claim ages: the
        message comes back and sends the one DLQ message (before, the job had none)."""
        supervisor, backends, clock, _ = dying_behind_proxy
        job = settle_dying(dying_behind_proxy, settings, tmp_path, "drop")
        assert not len(supervisor.running)
        actions = [getattr(r, "action", None) for r in caplog.records]
        assert actions.count("dead_letter_unsure") == 1
        assert dead_letters(settings) == []
        returned_and_settled(supervisor, backends, clock, settings)
        assert_one_fate(backends, settings, job)
        assert record_of(backends, job).dead_letter == "sent"

    def test_a_dead_letter_whose_reply_was_lost_is_sent_again_under_one_id(
            self, dying_behind_proxy, settings, tmp_path, caplog):
        """A DLQ send SQS took but whose reply was lost is sent again when the message
        returns (no dead job is left without one): both copies carry one dead-letter id,
        which a DLQ consumer dedupes on, and the record then says sent."""
        supervisor, backends, clock, _ = dying_behind_proxy
        job = settle_dying(dying_behind_proxy, settings, tmp_path, "drop_reply")
        returned_and_settled(supervisor, backends, clock, settings)
        record = record_of(backends, job)
        ids = [d["imposer_dead_letter_id"] for d in dead_letters(settings)]
        assert ids == [f"{record.key}/{record.epoch}"] * 2
        assert record.dead_letter == "sent"

    def test_a_dead_letter_never_sent_is_sent_when_its_message_returns(
            self, dying_behind_proxy, settings, tmp_path):
        """A dead job released without its DLQ message (SQS refused the send; a host killed
        right after the release leaves the same record and message) gets exactly one when its
        message returns, and no other host may claim it after that."""
        supervisor, backends, clock, _ = dying_behind_proxy
        job = settle_dying(dying_behind_proxy, settings, tmp_path, "error")
        assert record_of(backends, job).dead_letter == "owed"
        assert dead_letters(settings) == []
        wait_for(lambda: (supervisor.fill_free_slots(),
                          sum(backends.queue.depth().values()))[1] == 0, 60,
                 "the returning message to be dead-lettered")
        assert_one_fate(backends, settings, job)
        assert not backends.jobs.claim_dead_letter(
            "acme", job, dead_letter_claim(clock.time(), "another-host"),
            stale=dead_letter_claim(clock.time() + 3600, ""))


class TestOneDeadLetterPerMessage:
    def send_invalid(self, settings) -> str:
        """Send a body that is no job; its SQS message id."""
        sqs = boto3.client("sqs")
        url = sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
        return sqs.send_message(QueueUrl=url, MessageBody="not a job",
                                MessageGroupId="acme")["MessageId"]

    def reject(self, supervisor, backends) -> None:
        wait_for(lambda: (supervisor.fill_free_slots(),
                          sum(backends.queue.depth().values()))[1] == 0, 60,
                 "the invalid message to leave the queue")

    def test_an_invalid_message_dead_letter_names_the_message(
            self, by_hand_behind_proxy, settings):
        """The DLQ copy of an invalid message carries imposer_dead_letter_id = message/<id>."""
        supervisor, backends, _, _ = by_hand_behind_proxy
        message_id = self.send_invalid(settings)
        self.reject(supervisor, backends)
        assert [d["imposer_dead_letter_id"] for d in dead_letters(settings)] == [
            f"message/{message_id}"]

    def test_a_lost_reply_is_not_sent_again(self, by_hand_behind_proxy, settings, caplog):
        """An invalid message whose DLQ send's reply is lost is sent neither again by botocore
        nor when it would come back: one DLQ message, its own gone, an error line saying so."""
        supervisor, backends, _, proxy = by_hand_behind_proxy
        message_id = self.send_invalid(settings)
        proxy.inject("drop_reply", 600, service="sqs", operation="SendMessage")
        self.reject(supervisor, backends)
        proxy.clear()
        assert [d["imposer_dead_letter_id"] for d in dead_letters(settings)] == [
            f"message/{message_id}"]
        unsure = [r for r in caplog.records if getattr(r, "action", None) == "dead_letter_unsure"]
        assert [r.message_id for r in unsure] == [message_id]

    def test_a_refused_send_is_tried_again_when_the_message_returns(
            self, by_hand_behind_proxy, settings):
        """A DLQ send SQS refused leaves the invalid message in the queue; it is dead-lettered
        once when it comes back."""
        supervisor, backends, clock, proxy = by_hand_behind_proxy
        message_id = self.send_invalid(settings)
        proxy.inject("error", 600, service="sqs", operation="SendMessage")
        wait_for(lambda: (supervisor.fill_free_slots(), proxy.injected[("sqs", "error")])[1] > 0, 60,
                 "a refused DLQ send")
        proxy.clear()
        assert dead_letters(settings) == []
        self.reject(supervisor, backends)
        assert [d["imposer_dead_letter_id"] for d in dead_letters(settings)] == [
            f"message/{message_id}"]


@pytest.mark.slow
class TestNoOrphans:
    def test_a_killed_pool_child_takes_its_tools_with_it(self, settings, backends, tmp_path,
                                                         workers):
        """kill -9 of a pool child also ends its tool and the helper the tool detached."""
        job = submit_jobs(settings, tmp_path, "acme", 1,
                          layout(fake_sleep=120, fake_spawn=1))[0]
        worker = Worker(settings, tmp_path, "orphans", "--slots", "1",
                        env={"IMPOSER_MAX_ATTEMPTS": "1"})
        workers.append(worker)
        tools = wait_for(lambda: len(tool_processes(job)) >= 2 and tool_processes(job), 60,
                         "the tool and its detached helper")
        child = next(p.parent() for p in tools if p.parent() and
                     "fake-pdftoolbox" not in " ".join(p.parent().cmdline()))
        child.kill()
        wait_for(lambda: not tool_processes(job), 30, "the tools of the killed child to end")
        record = wait_for(lambda: (r := record_of(backends, job)) and r.status.final and r, 60,
                          "the job's fate")
        assert (record.status, record.error_kind) == (JobStatus.DEAD, "child_died")
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker.tail()

    def test_restart_clears_what_an_earlier_run_left(self, settings, tmp_path, workers):
        """A host that starts kills its earlier run's tools and removes its work dirs, only its."""
        work = tmp_path / "work"
        stale = work / "boot-host" / "oldboot" / "slot-0" / "job-x"
        stale.mkdir(parents=True)
        (stale / "input.pdf").write_bytes(b"%PDF-1.7")
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        mine = subprocess.Popen(sleeper, env={**os.environ,
                                              "IMPOSER_TOOL_OWNER": "boot-host/oldboot/0"},
                                start_new_session=True)
        theirs = subprocess.Popen(sleeper, env={**os.environ,
                                                "IMPOSER_TOOL_OWNER": "other-host/x/0"},
                                  start_new_session=True)
        try:
            worker = Worker(settings, tmp_path, "boot-host", "--slots", "1", "--exit-when-idle",
                            env={"IMPOSER_WORK_DIR": str(work)})
            workers.append(worker)
            assert worker.wait(60) == 0, worker.tail()
            assert mine.wait(10) == -signal.SIGKILL
            assert theirs.poll() is None, "another host's tool was killed"
            assert not (work / "boot-host" / "oldboot").exists()
            (cleared,) = worker.actions("leftovers_cleared")
            assert (cleared["killed"], cleared["removed"]) == (1, 1)
        finally:
            for proc in (mine, theirs):
                proc.kill()
                proc.wait()

    def test_restart_leaves_a_live_run_of_its_host_id_alone(self, settings, tmp_path, workers):
        """A host booting beside a live worker with its host id leaves that worker's tools and
        work dirs alone; those of a run whose parent died, or whose pid was reused, it clears."""
        work = tmp_path / "work"
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        parents = [subprocess.Popen(sleeper) for _ in range(2)]
        live, gone = (cleanup.boot_id(psutil.Process(p.pid)) for p in parents)
        parents[1].kill()
        parents[1].wait()
        started = int(psutil.Process(parents[0].pid).create_time())
        reused = f"{parents[0].pid}-{started - 3600}-0a0a0a0a"  # the live pid, another process
        tools = {}
        for boot in (live, gone, reused):
            (work / "twin-host" / boot / "slot-0" / "job-x").mkdir(parents=True)
            tools[boot] = subprocess.Popen(sleeper, start_new_session=True, env={
                **os.environ, "IMPOSER_TOOL_OWNER": f"twin-host/{boot}/0"})
        try:
            worker = Worker(settings, tmp_path, "twin-host", "--slots", "1", "--exit-when-idle",
                            env={"IMPOSER_WORK_DIR": str(work)})
            workers.append(worker)
            assert worker.wait(60) == 0, worker.tail()
            assert tools[live].poll() is None, "a live worker's tool was killed"
            assert (work / "twin-host" / live / "slot-0" / "job-x").is_dir()
            for boot in (gone, reused):
                assert tools[boot].wait(10) == -signal.SIGKILL
                assert not (work / "twin-host" / boot).exists()
            (cleared,) = worker.actions("leftovers_cleared")
            assert (cleared["killed"], cleared["removed"]) == (2, 2)
        finally:
            for proc in [*tools.values(), parents[0]]:
                proc.kill()
                proc.wait()


@pytest.mark.slow
class TestOneCommitPerJob:
    def test_a_frozen_hosts_attempt_never_becomes_the_plate(self, settings, backends, tmp_path,
                                                             workers):
        """Host A frozen past its lease TTL: B re-runs the job; A's late upload never surfaces."""
        s3 = boto3.client("s3")
        s3.put_bucket_versioning(Bucket=settings.bucket,
                                 VersioningConfiguration={"Status": "Enabled"})
        job = submit_jobs(settings, tmp_path, "acme", 1, layout(fake_sleep=2))[0]
        a = Worker(settings, tmp_path, "host-a", "--slots", "1")
        workers.append(a)
        held = wait_for(lambda: [l for l in backends.leases.leases() if l.host == "host-a"],
                        30, "host A to take the job")
        os.killpg(a.proc.pid, signal.SIGSTOP)
        try:
            b = Worker(settings, tmp_path, "host-b", "--slots", "1")
            workers.append(b)
            record = wait_for(lambda: (r := record_of(backends, job)) and
                              r.status == JobStatus.SUCCEEDED and r, 60, "host B to finish it")
        finally:
            os.killpg(a.proc.pid, signal.SIGCONT)
        assert record.host == "host-b" and record.output_epoch != held[0].epoch
        attempt_a = S3Uri.parse(f"s3://{settings.bucket}/attempts/acme/{job}/{held[0].epoch}.pdf")
        # frozen after its acquire but before its launch, A finds the lease gone at launch
        wait_for(lambda: a.actions("lease_lost") or a.actions("acquire_slow"), 60,
                 "host A to find its lease gone")
        output = S3Uri.parse(record.output)
        versions = wait_for(lambda: s3.list_object_versions(
            Bucket=output.bucket, Prefix=output.key).get("Versions"), 30,
            "the plate to be promoted (after the release that made the job final)")
        epochs = {s3.head_object(Bucket=output.bucket, Key=output.key, VersionId=v["VersionId"])
                  ["Metadata"].get(EPOCH_META) for v in versions}
        assert epochs == {record.output_epoch}, "another attempt's plate became visible"
        wait_for(lambda: "Contents" not in s3.list_objects_v2(
            Bucket=attempt_a.bucket, Prefix=attempt_a.key), 30, "A's void attempt to be removed")
        for w in (a, b):
            w.signal(signal.SIGTERM)
            w.signal(signal.SIGTERM)


class TestUnreadSenders:
    def test_a_burst_whose_tenant_row_cannot_be_read_is_judged_one_by_one(
            self, by_hand_behind_proxy, settings, tmp_path):
        """An AWS error reading the tenant's row (its bound senders) while a receive's burst
        is sorted leaves every message to the guarded one-by-one path; none escapes to
        the loop, which would stop the host (seen in the chaos run: exit 4)."""
        supervisor, backends, clock, proxy = by_hand_behind_proxy
        submit_jobs(settings, tmp_path, "acme", 2, layout())
        messages = []
        wait_for(lambda: messages.extend(backends.queue.receive(10, 1, 60)) or
                 len(messages) == 2, 30, "both messages received")
        proxy.inject("error", 600, service="dynamodb", operation="GetItem")
        left = supervisor.dispatch.take_bursts(messages, [0, 1], lambda: False)
        assert [m.message_id for m in left] == [m.message_id for m in messages]
        assert backends.leases.counters().get("acme") is None or \
            backends.leases.counters()["acme"].inflight == 0
