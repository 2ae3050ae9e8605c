"""`imposer run` as real subprocesses sharing the local AWS stack over HTTP."""

from __future__ import annotations

import json
import signal
import time

import boto3
import psutil
import pytest

from imposer.models import JobStatus, TenantConfig
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.jobs import record_of
from tests.fixtures.workers import Worker, calls_by_job, layout, submit_jobs, wait_for
from tests.fixtures.workers import workers  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


def statuses(backends, ids):
    return {i: (r.status.value if (r := record_of(backends, i)) else None) for i in ids}


def all_final(backends, ids):
    return all(s in ("succeeded", "failed", "dead") for s in statuses(backends, ids).values())


def dlq_bodies(settings) -> list[dict]:
    sqs = boto3.client("sqs")
    url = sqs.get_queue_url(QueueName=settings.dlq_name)["QueueUrl"]
    out = []
    for _ in range(5):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                  MessageAttributeNames=["All"]).get("Messages", [])
        if not got:
            break
        for m in got:
            out.append({"body": m["Body"], "error": m["MessageAttributes"]["imposer_error"]
                        ["StringValue"]})
    return out


class TestTwoHosts:
    def test_heavy_tenant_capped_across_hosts(self, settings, backends, tmp_path, workers):
        """Two hosts of 4 slots never run the heavy tenant above its cap of 2; all jobs run once."""
        backends.tenants.put(TenantConfig(tenant_id="heavy", cap=2))
        heavy = submit_jobs(settings, tmp_path, "heavy", 16, layout(fake_sleep=0.6))
        light = submit_jobs(settings, tmp_path, "light", 4, layout(fake_sleep=0.3))
        for host in ("host-a", "host-b"):
            workers.append(Worker(settings, tmp_path, host, "--slots", "4", "--exit-when-idle"))
        worst, samples, light_seen = 0, 0, 0
        while any(w.proc.poll() is None for w in workers):
            held = [l.tenant_id for l in backends.leases.leases()]
            worst = max(worst, held.count("heavy"))
            light_seen = max(light_seen, held.count("light"))
            samples += 1
            time.sleep(0.05)
            assert samples < 4000, "workers did not finish"
        assert [w.proc.returncode for w in workers] == [0, 0]
        assert samples > 20
        assert worst == 2, f"heavy tenant peaked at {worst} slots"
        assert light_seen >= 1
        assert set(statuses(backends, heavy + light).values()) == {"succeeded"}
        runs = calls_by_job(workers[0].calls)
        assert {j: runs.get(j) for j in heavy + light} == {j: 1 for j in heavy + light}
        assert backends.leases.leases() == []
        assert all(c.inflight == 0 for c in backends.leases.counters().values())
        defers = sum(len(w.actions("cap_defer")) for w in workers)
        assert defers > 0, "the heavy tenant was never deferred"
        for job in heavy:
            assert record_of(backends, job).attempts == 1


class TestCrash:
    def test_kill9_mid_job_is_recovered_by_another_host(self, settings, backends, tmp_path,
                                                         workers):
        """A host killed mid-job loses its leases to the sweep; another host finishes the jobs."""
        ids = submit_jobs(settings, tmp_path, "acme", 2, layout())
        doomed = Worker(settings, tmp_path, "doomed", "--slots", "2",
                        env={"FAKE_PDFTOOLBOX_SLEEP": "60"})
        workers.append(doomed)
        wait_for(lambda: len(backends.leases.leases()) == 2, 30, "both jobs to start")
        doomed.crash()
        rescuer = Worker(settings, tmp_path, "rescuer", "--slots", "2", "--exit-when-idle",
                         env={"FAKE_PDFTOOLBOX_SLEEP": "0.1"})
        workers.append(rescuer)
        assert rescuer.wait(60) == 0, rescuer.tail()
        assert set(statuses(backends, ids).values()) == {"succeeded"}
        for job in ids:
            record = record_of(backends, job)
            assert (record.attempts, record.host) == (2, "rescuer")
        recovered = rescuer.actions("lease_recovered")
        assert {r["job_id"] for r in recovered} == set(ids)
        assert backends.leases.leases() == []
        assert backends.leases.counters()["acme"].inflight == 0

    def test_restart_reclaims_own_orphans_at_once(self, settings, backends, tmp_path, workers):
        """The same host restarted after kill -9 takes its jobs back in seconds, not a lease TTL."""
        long_ttl = settings.evolve(lease_ttl_seconds=600.0)
        ids = submit_jobs(settings, tmp_path, "acme", 2, layout())
        first = Worker(long_ttl, tmp_path, "same", "--slots", "2",
                       env={"FAKE_PDFTOOLBOX_SLEEP": "60"})
        workers.append(first)
        wait_for(lambda: len(backends.leases.leases()) == 2, 30, "both jobs to start")
        first.crash()
        began = time.monotonic()
        second = Worker(long_ttl, tmp_path, "same", "--slots", "2", "--exit-when-idle",
                        env={"FAKE_PDFTOOLBOX_SLEEP": "0.1"})
        workers.append(second)
        assert second.wait(60) == 0, second.tail()
        took = time.monotonic() - began
        assert took < 30, f"orphans took {took:.0f}s to finish"
        assert set(statuses(backends, ids).values()) == {"succeeded"}
        boot = second.actions("boot")[0]
        assert boot["reclaimed"] == 2
        assert backends.leases.counters()["acme"].inflight == 0


class TestToolFates:
    def test_each_fake_behaviour_gets_its_fate(self, settings, backends, tmp_path, workers):
        """Exit codes, crash, hang, spawn and memory end in the right fate; the parent serves on.

        Each fate is the only way its job can end: the memory job holds its
        memory until the watchdog kills it, on a host whose job timeout is far
        off (a 2 s timeout raced the watchdog on a busy machine), and the
        timeout that ends the hanging job leaves the quick ones a wide margin.
        """
        specs = {
            "ok": layout(),
            "badpdf": layout(fake_exit=105),
            "internal": layout(fake_exit=103),
            "config": layout(fake_exit=101),
            "crash": layout(fake_crash=1),
            "hang": layout(fake_hang=1),
            "spawn": layout(fake_spawn=1),
            "licence": layout(fake_exit=100),
        }
        jobs = {name: submit_jobs(settings, tmp_path, name, 1, spec)[0]
                for name, spec in specs.items()}
        worker = Worker(settings, tmp_path, "fates", "--slots", "4", "--max-attempts", "2",
                        "--job-timeout-seconds", "5")
        workers.append(worker)
        finals = [j for n, j in jobs.items() if n != "licence"]
        wait_for(lambda: all_final(backends, finals), 120, "every job to reach its fate", 0.3)
        got = {name: record_of(backends, job) for name, job in jobs.items()}
        assert got["ok"].status == JobStatus.SUCCEEDED
        assert got["spawn"].status == JobStatus.SUCCEEDED
        assert (got["badpdf"].status, got["badpdf"].error_kind) == (JobStatus.FAILED, "bad_pdf")
        assert got["badpdf"].attempts == 1
        for name, kind in (("internal", "tool_internal"), ("config", "tool_config"),
                           ("crash", "tool_internal"), ("hang", "timeout")):
            record = got[name]
            assert (record.status, record.error_kind) == (JobStatus.DEAD, kind), name
            assert (record.attempts, record.failures) == (2, 2), name
        finished = {(r.get("job_id"), r.get("status"), r.get("error_kind"))
                    for r in worker.records() if r.get("action") == "job_finished"}
        for name, kind in (("hang", "timeout"), ("badpdf", "bad_pdf"), ("ok", None)):
            final = got[name].status.value
            assert (jobs[name], final, kind) in finished, name  # an operator greps for these
        dead = {json.loads(d["body"])["job_id"] for d in dlq_bodies(settings)}
        assert dead == {jobs[n] for n in ("internal", "config", "crash", "hang")}
        # Licence failures are retried but never counted against the tenant.
        wait_for(lambda: (r := record_of(backends, jobs["licence"])) and r.attempts >= 2, 30,
                 "the licence job to be retried")
        licence = record_of(backends, jobs["licence"])
        assert licence.failures == 0 and licence.status != JobStatus.DEAD
        # Over the memory ceiling: the tool holds 300 MB until the watchdog kills it.
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        jobs["memory"] = submit_jobs(settings, tmp_path, "memory", 1,
                                     layout(fake_memory_mb=300, fake_hang=1))[0]
        watched = Worker(settings, tmp_path, "watched", "--slots", "2", "--max-attempts", "2",
                         "--job-timeout-seconds", "3600", "--memory-limit-mb", "150")
        workers.append(watched)
        wait_for(lambda: all_final(backends, [jobs["memory"]]), 120, "the watchdog's kill")
        memory = record_of(backends, jobs["memory"])
        assert (memory.status, memory.error_kind) == (JobStatus.FAILED, "resource")
        # No tool process outlived its job: hang's tool and spawn's grandchild are gone.
        for name in ("hang", "spawn", "memory", "crash"):
            leftovers = [p for p in psutil.process_iter(["cmdline"])
                         if any(jobs[name] in part for part in (p.info["cmdline"] or []))]
            assert leftovers == [], f"{name} left {leftovers}"
        # The parent keeps serving after all of that.
        late = submit_jobs(settings, tmp_path, "late", 1, layout())[0]
        wait_for(lambda: all_final(backends, [late]), 30, "a job after the failures")
        assert record_of(backends, late).status == JobStatus.SUCCEEDED
        watched.signal(signal.SIGTERM)
        assert watched.wait(30) == 0


class TestMessages:
    def test_invalid_messages_are_dead_lettered_with_reason(self, settings, backends, tmp_path,
                                                            workers):
        """Garbage, a missing field and a key outside the tenant prefix go to the DLQ, explained."""
        sqs = boto3.client("sqs")
        url = sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
        b = settings.bucket
        bodies = [
            "not json at all",
            json.dumps({"job_id": "j-missing", "tenant_id": "acme"}),
            json.dumps({"job_id": "j-escape", "tenant_id": "acme",
                        "input": f"s3://{b}/tenants/other/secret.pdf", "layout": layout(),
                        "output": f"s3://{b}/tenants/acme/out.pdf"}),
        ]
        for body in bodies:
            sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="acme")
        ok = submit_jobs(settings, tmp_path, "acme", 1, layout())
        worker = Worker(settings, tmp_path, "msgs", "--slots", "2", "--exit-when-idle")
        workers.append(worker)
        assert worker.wait(60) == 0, worker.tail()
        errors = sorted(d["error"] for d in dlq_bodies(settings))
        assert len(errors) == 3
        assert any("not JSON" in e for e in errors)
        assert any("input missing" in e for e in errors)
        assert any("outside 'tenants/acme/'" in e for e in errors)
        escaped = record_of(backends, "j-escape")
        assert escaped.status == JobStatus.FAILED and escaped.error_kind == "invalid_message"
        assert record_of(backends, ok[0]).status == JobStatus.SUCCEEDED

    def test_duplicate_delivery_runs_once(self, settings, backends, tmp_path, workers):
        """Two copies of one job's message run the tool once; the extra copy is deleted."""
        sqs = boto3.client("sqs")
        url = sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
        job = submit_jobs(settings, tmp_path, "acme", 1, layout(fake_sleep=1.5))[0]
        body = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]["Body"]
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="acme")
        worker = Worker(settings, tmp_path, "dups", "--slots", "2", "--exit-when-idle")
        workers.append(worker)
        assert worker.wait(60) == 0, worker.tail()
        assert calls_by_job(worker.calls) == {job: 1}
        assert record_of(backends, job).status == JobStatus.SUCCEEDED
        assert len(worker.actions("duplicate_running")) + len(worker.actions("duplicate_done")) >= 1


class TestSignals:
    def test_sigterm_drains_running_jobs(self, settings, backends, tmp_path, workers):
        """SIGTERM stops new work but lets running jobs finish, then exits 0 with no lease left."""
        ids = submit_jobs(settings, tmp_path, "acme", 3, layout(fake_sleep=2))
        worker = Worker(settings, tmp_path, "drain", "--slots", "2")
        workers.append(worker)
        wait_for(lambda: len(backends.leases.leases()) == 2, 30, "two jobs to start")
        running = {l.job_id for l in backends.leases.leases()}
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0, worker.tail()
        got = statuses(backends, ids)
        assert {got[j] for j in running} == {"succeeded"}
        waiting = [j for j in ids if j not in running]
        assert got[waiting[0]] in (None, "queued")
        assert backends.leases.leases() == []
        assert worker.actions("drain")

    def test_a_drain_hands_parked_work_back_at_once_and_loses_nothing(
            self, settings, backends, tmp_path, workers):
        """A stop, reboot or replacement: SIGTERM makes the parked job's message visible while
        the running job still finishes; another host then runs it, each job exactly once."""
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        until = tmp_path / "finish-now"
        running = submit_jobs(settings, tmp_path, "acme", 1, layout(fake_until=until))[0]
        parked = submit_jobs(settings, tmp_path, "acme", 1, layout())[0]
        # A park window far beyond the test's waits: only the drain can make it visible.
        worker = Worker(settings, tmp_path, "stopping", "--slots", "2",
                        env={"IMPOSER_PARK_SECONDS": "600"})
        workers.append(worker)
        wait_for(lambda: [l.job_id for l in backends.leases.leases()] == [running], 30,
                 "the first job to run")
        wait_for(lambda: worker.actions("cap_defer"), 30, "the second job to be parked")
        assert backends.queue.depth()["visible"] == 0
        worker.signal(signal.SIGTERM)
        wait_for(lambda: backends.queue.depth()["visible"] == 1, 30,
                 "the parked message to be handed back during the drain")
        assert worker.proc.poll() is None, "the drain ended before its running job did"
        assert [l.job_id for l in backends.leases.leases()] == [running]
        until.touch()
        assert worker.wait(60) == 0, worker.tail()
        (returned,) = worker.actions("drain_give_back_parked")
        assert returned["count"] == 1
        successor = Worker(settings, tmp_path, "successor", "--slots", "2", "--exit-when-idle")
        workers.append(successor)
        assert successor.wait(60) == 0, successor.tail()
        assert statuses(backends, [running, parked]) == {running: "succeeded",
                                                          parked: "succeeded"}
        assert calls_by_job(worker.calls) == {running: 1, parked: 1}
        assert backends.leases.leases() == []
        assert backends.queue.depth() == {"visible": 0, "in_flight": 0, "delayed": 0}

    def test_second_signal_stops_fast_and_returns_messages(self, settings, backends, tmp_path,
                                                           workers):
        """A second SIGTERM kills the children, releases leases and makes messages visible."""
        ids = submit_jobs(settings, tmp_path, "acme", 2, layout(fake_sleep=60))
        worker = Worker(settings, tmp_path, "fast", "--slots", "2")
        workers.append(worker)
        wait_for(lambda: len(backends.leases.leases()) == 2, 30, "two jobs to start")
        worker.signal(signal.SIGTERM)
        time.sleep(0.5)
        worker.signal(signal.SIGTERM)
        assert worker.wait(20) == 0, worker.tail()
        assert backends.leases.leases() == []
        assert backends.leases.counters()["acme"].inflight == 0
        assert {record_of(backends, j).status for j in ids} == {JobStatus.QUEUED}
        wait_for(lambda: backends.queue.depth()["visible"] == 2, 10, "messages to be visible")
        for job in ids:
            assert not [p for p in psutil.process_iter(["cmdline"])
                        if any(job in part for part in (p.info["cmdline"] or []))]

    def test_sigterm_while_the_boot_waits_for_aws_stops_cleanly(self, settings, tmp_path,
                                                                 workers, aws_endpoint):
        """A SIGTERM while the boot rides out AWS errors ends the retries: exit 0, not 4."""
        proxy = FaultProxy(aws_endpoint, "boot").start()
        try:
            proxy.inject("error", 600)
            worker = Worker(settings, tmp_path, "stop-at-boot", "--slots", "1",
                            env={"AWS_ENDPOINT_URL": proxy.url,
                                 "IMPOSER_BOOT_RETRY_SECONDS": "600"})
            workers.append(worker)
            wait_for(lambda: worker.actions("aws_retry"), 60, "the boot to retry AWS")
            worker.signal(signal.SIGTERM)
            assert worker.wait(60) == 0, worker.tail()
        finally:
            proxy.stop()
        assert not worker.actions("boot")
        (stopped,) = worker.actions("stopped")
        assert stopped["booted"] is False


class TestRetention:
    def test_long_deferred_job_is_republished_not_lost(self, settings, backends, tmp_path,
                                                       workers):
        """A job deferred past the receive-count threshold is re-published, never dead-lettered."""
        backends.tenants.put(TenantConfig(tenant_id="paused", cap=0))
        job = submit_jobs(settings, tmp_path, "paused", 1, layout())[0]
        worker = Worker(settings, tmp_path, "keeper", "--slots", "2",
                        "--republish-receive-count", "3", "--defer-seconds", "0.1")
        workers.append(worker)
        wait_for(lambda: worker.actions("republished"), 60, "a re-publish")
        record = record_of(backends, job)
        assert record.status == JobStatus.QUEUED and record.defers >= 3
        assert "is paused (cap 0)" in record.wait_reason
        assert dlq_bodies(settings) == []
        backends.tenants.put(TenantConfig(tenant_id="paused", cap=1))
        wait_for(lambda: all_final(backends, [job]), 30, "the job to run once unpaused")
        record = record_of(backends, job)
        assert record.status == JobStatus.SUCCEEDED
        assert record.queue_wait >= 1.0, "queue wait must count from the first submission"
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0


class TestBatchModes:
    def test_max_jobs_stops_after_n(self, settings, backends, tmp_path, workers):
        """`--max-jobs 2` runs two jobs, then drains and exits 0, leaving the rest queued."""
        ids = submit_jobs(settings, tmp_path, "acme", 3, layout())
        worker = Worker(settings, tmp_path, "batch", "--slots", "1", "--max-jobs", "2")
        workers.append(worker)
        assert worker.wait(60) == 0, worker.tail()
        got = statuses(backends, ids)
        assert sorted(v or "unseen" for v in got.values()).count("succeeded") == 2
        assert backends.queue.depth()["visible"] + backends.queue.depth()["in_flight"] == 1
        # the hourly rollups (written every 60 s) got the run's two starts at the stop: the
        # rollups thread's last pass (what `imposer stats` reads)
        assert settings.rollup_seconds >= 60
        now = time.time()
        hours = list(backends.rollups.read(now - 7200, now + 3600))
        assert sum(int(h.get("started", 0)) for h in hours) == 2, hours

    def test_near_retention_is_republished(self, settings, backends, tmp_path, workers):
        """A deferred message close to the queue's retention is re-published, not left to expire."""
        backends.tenants.put(TenantConfig(tenant_id="paused", cap=0))
        job = submit_jobs(settings, tmp_path, "paused", 1, layout())[0]
        worker = Worker(settings, tmp_path, "old", "--slots", "1", "--retention-seconds", "60",
                        "--republish-margin-seconds", "59.5")
        workers.append(worker)
        done = wait_for(lambda: worker.actions("republished"), 30, "a re-publish")
        assert done[0]["job_id"] == job
        assert record_of(backends, job).status == JobStatus.QUEUED


class TestOpenEngine:
    def test_open_engine_imposes_in_the_pool(self, settings, backends, tmp_path, workers):
        """With --engine open a preset layout is imposed in a pool child into a real plate."""
        import pikepdf

        from imposer.aws.s3 import Storage
        from imposer.client import submit
        from imposer.dev.samples import A5, numbered_pdf
        from imposer.models import S3Uri

        pdf = numbered_pdf(tmp_path / "booklet.pdf", 16, *A5)
        req = submit("acme", pdf, "a5-booklet-a4", bucket=settings.bucket,
                     queue=settings.queue_name)
        worker = Worker(settings, tmp_path, "open", "--slots", "2", "--engine", "open",
                        "--exit-when-idle")
        workers.append(worker)
        assert worker.wait(60) == 0, worker.tail()
        assert record_of(backends, req.job_id).status == JobStatus.SUCCEEDED
        plate = tmp_path / "plate.pdf"
        uri = S3Uri.parse(req.output)
        Storage(settings.region).client.download_file(uri.bucket, uri.key, str(plate))
        with pikepdf.open(plate) as out:
            assert len(out.pages) == 8  # 4 sheets, front and back
            assert [round(float(v), 2) for v in out.pages[0].MediaBox] == [0, 0, 841.89, 595.28]


class TestIdleExit:
    def test_paused_tenants_work_does_not_keep_the_worker_up(self, settings, backends, tmp_path,
                                                             workers):
        """--exit-when-idle ends once only a paused tenant's (cap 0) jobs are left."""
        backends.tenants.put(TenantConfig(tenant_id="paused", cap=0))
        parked = submit_jobs(settings, tmp_path, "paused", 1, layout())
        ready = submit_jobs(settings, tmp_path, "acme", 2, layout())
        worker = Worker(settings, tmp_path, "idle", "--slots", "2", "--exit-when-idle")
        workers.append(worker)
        assert worker.wait(60) == 0, worker.tail()
        assert set(statuses(backends, ready).values()) == {"succeeded"}
        assert statuses(backends, parked) == {parked[0]: "queued"}
