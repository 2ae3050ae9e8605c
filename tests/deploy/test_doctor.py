"""`imposer doctor`: the host preflight, on the local stack and on hosts set up wrong."""

from __future__ import annotations

import configparser
import json
import os
import re
import socket
import time
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

from imposer.cli import main
from imposer.cli.doctor import clock_skew
from imposer.settings import Settings
from imposer.worker.signals import STOP_MARGIN_SECONDS
from tests.fixtures.aws import env_for
from tests.fixtures.workers import FAKE

ROOT = Path(__file__).resolve().parents[2]


def doctor(settings, *args: str, **env: str):
    """Run `imposer doctor --json` with *settings*' resources and the test lease TTL."""
    full = env_for(settings)
    full.update({"IMPOSER_ENGINE": "open", "IMPOSER_LEASE_TTL_SECONDS": "5",
                 "IMPOSER_HEARTBEAT_SECONDS": "0.5"})
    full.update(env)
    outcome = CliRunner().invoke(main, ["doctor", "--json", *args], env=full,
                                 catch_exceptions=False)
    report = json.loads(outcome.stdout)
    return outcome.exit_code, {c["name"]: (c["status"], c["detail"]) for c in report["checks"]}


def failed(checks: dict) -> dict:
    return {name: detail for name, (status, detail) in checks.items() if status == "fail"}


def items(settings) -> dict[str, int]:
    client = boto3.session.Session().client("dynamodb")
    return {t: client.scan(TableName=t)["Count"] for t in (
        settings.leases_table, settings.jobs_table, settings.tenants_table,
        settings.outbox_table, settings.rollups_table)}


class TestDoctor:
    def test_a_provisioned_host_passes_every_check(self, settings):
        """After `imposer init`, every check passes and the exit code is 0."""
        code, checks = doctor(settings)
        assert (code, failed(checks)) == (0, {})
        assert {f"table {s}" for s in (settings.leases_table, settings.jobs_table,
                                       settings.tenants_table, settings.outbox_table,
                                       settings.rollups_table)} <= set(checks)
        assert {"engine", "work dir", "endpoint", "credentials", "clock",
                f"queue {settings.queue_name}", f"queue {settings.dlq_name}",
                f"bucket {settings.bucket}", "permission: lease transaction"} <= set(checks)

    def test_the_checklist_says_what_it_found(self, settings):
        """The plain output has one line per check and ends with the verdict."""
        env = env_for(settings)
        env.update({"IMPOSER_ENGINE": "open", "IMPOSER_LEASE_TTL_SECONDS": "5",
                    "IMPOSER_HEARTBEAT_SECONDS": "0.5"})
        outcome = CliRunner().invoke(main, ["doctor"], env=env, catch_exceptions=False)
        lines = outcome.output.splitlines()
        assert outcome.exit_code == 0
        assert any(line.split()[:3] == ["ok", "table", settings.jobs_table] and
                   "by-tenant, open, by-job; TTL on expires_at" in line for line in lines)
        assert lines[-1] == "all checks passed"

    def test_probes_change_nothing(self, settings, backends):
        """The permission probes leave every table and the queue as they were."""
        from imposer.models import TenantConfig

        backends.tenants.put(TenantConfig(tenant_id="acme", cap=2))
        before, depth = items(settings), backends.queue.depth()
        assert doctor(settings)[0] == 0
        assert (items(settings), backends.queue.depth()) == (before, depth)

    def test_a_table_without_its_ttl_fails(self, settings):
        """TTL off on the jobs table is a failed check naming the attribute, and exit 3."""
        boto3.session.Session().client("dynamodb").update_time_to_live(
            TableName=settings.jobs_table,
            TimeToLiveSpecification={"Enabled": False, "AttributeName": "expires_at"})
        code, checks = doctor(settings)
        assert code == 3
        assert "TTL is not on expires_at" in failed(checks)[f"table {settings.jobs_table}"]
        assert checks["permissions"][0] == "skip"

    def test_a_missing_table_fails(self, settings):
        """A deleted table is a failed check telling the operator to run init."""
        boto3.session.Session().client("dynamodb").delete_table(TableName=settings.outbox_table)
        code, checks = doctor(settings)
        assert code == 3
        assert "imposer init" in failed(checks)[f"table {settings.outbox_table}"]

    def test_visibility_below_the_lease_ttl_fails(self, settings):
        """A queue whose visibility is shorter than the lease TTL would hand a running job out twice."""
        code, checks = doctor(settings, IMPOSER_LEASE_TTL_SECONDS="600")
        assert code == 3
        assert failed(checks) == {f"queue {settings.queue_name}":
                                  "visibility 5 s is below the lease TTL (600 s)"}

    def test_a_redrive_below_the_republish_count_fails(self, settings, backends):
        """Redrive after fewer receives than the re-publish count would dead-letter waiting jobs."""
        queue = backends.queue
        dlq_arn = queue.client.get_queue_attributes(
            QueueUrl=queue.url(settings.dlq_name),
            AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        queue.client.set_queue_attributes(QueueUrl=queue.url(), Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "100"})})
        code, checks = doctor(settings)
        assert code == 3
        assert "would dead-letter deferred jobs" in failed(checks)[f"queue {settings.queue_name}"]

    def test_pdftoolbox_must_be_there(self, settings):
        """The pdfToolbox engine needs its executable; the fake one passes, a missing one fails."""
        code, checks = doctor(settings, IMPOSER_ENGINE="pdftoolbox",
                              IMPOSER_PDFTOOLBOX="/nonexistent/pdfToolbox")
        assert code == 3 and "not found or not executable" in failed(checks)["engine"]
        code, checks = doctor(settings, IMPOSER_ENGINE="pdftoolbox", IMPOSER_PDFTOOLBOX=str(FAKE))
        assert (code, checks["engine"]) == (0, ("ok", f"pdfToolbox at {FAKE}"))

    def test_an_unreachable_endpoint_fails_and_skips_the_rest(self, settings):
        """Without AWS, doctor says it cannot reach the endpoint and checks no resource."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        code, checks = doctor(settings, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
        assert code == 3
        assert "cannot reach" in failed(checks)["endpoint"]
        assert checks["aws resources"][0] == "skip"

    def test_too_little_space_fails(self, settings):
        """A work dir with less free space than asked for fails."""
        code, checks = doctor(settings, "--min-free-mb", str(2**40))
        assert code == 3 and "needs" in failed(checks)["work dir"]

    def test_a_bucket_without_the_attempts_rule_is_only_a_warning(self, settings):
        """A bucket whose lifecycle rules were removed: doctor warns, but the host may start;
        with init's rules it is ok."""
        assert doctor(settings)[1][f"bucket {settings.bucket}"] == (
            "ok", "attempts/ expire after 2 day(s)")
        boto3.session.Session().client("s3").delete_bucket_lifecycle(Bucket=settings.bucket)
        code, checks = doctor(settings)
        assert code == 0 and checks[f"bucket {settings.bucket}"][0] == "warn"
        boto3.session.Session().client("s3").put_bucket_lifecycle_configuration(
            Bucket=settings.bucket, LifecycleConfiguration={"Rules": [{
                "ID": "attempts", "Status": "Enabled", "Filter": {"Prefix": "attempts/"},
                "Expiration": {"Days": 2}}]})
        assert doctor(settings)[1][f"bucket {settings.bucket}"] == (
            "ok", "attempts/ expire after 2 day(s)")


class TestTool:
    def tool(self, settings, **env: str):
        return doctor(settings, IMPOSER_ENGINE="pdftoolbox", IMPOSER_PDFTOOLBOX=str(FAKE), **env)

    def test_the_version_and_a_licence_for_the_slots_pass(self, settings):
        """The tool's version is named, and a licence for 8 processes passes 8 slots."""
        code, checks = self.tool(settings, IMPOSER_SLOTS="8")
        assert code == 0, failed(checks)
        assert checks["tool version"] == ("ok", "pdfToolbox (fake) 15.0")
        assert checks["licence"] == ("ok", "active for 8 parallel processes (IMPOSER_SLOTS 8)")

    def test_no_licence_fails_with_the_tools_reason(self, settings):
        """A tool with no licence activated exits 100 to the licence query: doctor fails."""
        code, checks = self.tool(settings, FAKE_PDFTOOLBOX_LICENCE="none")
        assert code == 3
        assert "exit code 100" in failed(checks)["licence"]
        assert "no licence is activated" in failed(checks)["licence"]

    def test_a_licence_for_fewer_processes_than_slots_fails(self, settings):
        """A licence for 4 processes on a host of 8 slots fails, naming both numbers."""
        code, checks = self.tool(settings, FAKE_PDFTOOLBOX_LICENCE_PROCESSES="4",
                                 IMPOSER_SLOTS="8")
        assert code == 3
        assert failed(checks)["licence"].startswith(
            "active for 4 parallel process(es); IMPOSER_SLOTS is 8")

    def test_the_licence_query_is_a_setting(self, settings):
        """An empty licence query skips the check; the query reaches the tool as given."""
        code, checks = self.tool(settings, IMPOSER_PDFTOOLBOX_LICENCE_CHECK="")
        assert code == 0 and checks["licence"][0] == "skip"
        code, checks = self.tool(settings, IMPOSER_PDFTOOLBOX_LICENCE_CHECK="--nosuchquery")
        assert code == 3 and "exit code 101" in failed(checks)["licence"]


class TestLogShipping:
    def ship(self, settings, group: str, *lines: str) -> None:
        """Put *lines* in this host's stream, as the CloudWatch agent would."""
        logs = boto3.session.Session().client("logs")
        streams = logs.describe_log_streams(logGroupName=group)["logStreams"]
        if settings.host_id not in {s["logStreamName"] for s in streams}:
            logs.create_log_stream(logGroupName=group, logStreamName=settings.host_id)
        logs.put_log_events(logGroupName=group, logStreamName=settings.host_id, logEvents=[
            {"timestamp": int(time.time() * 1000), "message": line} for line in lines])

    @pytest.fixture
    def group(self, names):
        name = f"/imposer/{names['table_prefix']}"
        boto3.session.Session().client("logs").create_log_group(logGroupName=name)
        return name

    def test_a_shipped_newest_line_passes(self, settings, group, tmp_path):
        """The file's newest line in this host's stream of the group is ok."""
        log = tmp_path / "worker.jsonl"
        log.write_text('{"action": "boot"}\n{"action": "stopped"}\n')
        self.ship(settings, group, '{"action": "boot"}', '{"action": "stopped"}')
        code, checks = doctor(settings, IMPOSER_LOG_GROUP=group, IMPOSER_LOG_FILE=str(log),
                              IMPOSER_HOST_ID=settings.host_id)
        assert (code, checks["log shipping"][0]) == (0, "ok"), checks["log shipping"]

    def test_a_line_never_shipped_fails_once_it_is_old_and_warns_while_fresh(
            self, settings, group, tmp_path):
        """An agent that is not shipping: a minute-old line missing from the stream fails;
        one just written is a warning only (the agent ships every few seconds)."""
        log = tmp_path / "worker.jsonl"
        log.write_text('{"action": "boot"}\n{"action": "not shipped"}\n')
        self.ship(settings, group, '{"action": "boot"}')
        env = {"IMPOSER_LOG_GROUP": group, "IMPOSER_LOG_FILE": str(log),
               "IMPOSER_HOST_ID": settings.host_id}
        code, checks = doctor(settings, **env)
        assert (code, checks["log shipping"][0]) == (0, "warn")
        old = time.time() - 600
        os.utime(log, (old, old))
        code, checks = doctor(settings, **env)
        assert code == 3 and "is amazon-cloudwatch-agent running" in failed(checks)["log shipping"]

    def test_no_stream_or_no_group_fails(self, settings, group, tmp_path):
        """A host whose agent never created its stream fails, and so does a missing group."""
        log = tmp_path / "worker.jsonl"
        log.write_text('{"action": "boot"}\n')
        old = time.time() - 600
        os.utime(log, (old, old))
        code, checks = doctor(settings, IMPOSER_LOG_GROUP=group, IMPOSER_LOG_FILE=str(log))
        assert code == 3 and "log shipping" in failed(checks)
        code, checks = doctor(settings, IMPOSER_LOG_GROUP=group + "-gone",
                              IMPOSER_LOG_FILE=str(log))
        assert code == 3 and "does not exist" in failed(checks)["log shipping"]

    def test_without_a_log_group_it_is_not_checked(self, settings):
        """IMPOSER_LOG_GROUP empty (a host that ships no logs, as in development): skipped."""
        assert doctor(settings)[1]["log shipping"][0] == "skip"


class TestClockSkew:
    @pytest.mark.parametrize(("sent", "received", "skew"), [
        (1704067200.0, 1704067200.2, -0.4),
        (1704067210.0, 1704067210.0, 9.5),
        (1704067190.0, 1704067190.0, -10.5),
    ])
    def test_skew_is_measured_from_the_middle_of_the_round_trip(self, sent, received, skew):
        """The Date header's whole second is taken at its middle; the host's time at the round trip's."""
        measured = clock_skew("Mon, 01 Jan 2024 00:00:00 GMT", sent, received)
        assert measured == pytest.approx(skew)


def stop_timeout_problem(unit_text: str, grace_seconds: float) -> str | None:
    """Say how the unit's TimeoutStopSec disagrees with a grace period, or None."""
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string(unit_text)
    timeout = float(unit["Service"]["TimeoutStopSec"])
    want = grace_seconds + STOP_MARGIN_SECONDS
    if timeout != want:
        return (f"TimeoutStopSec={timeout:g} is not IMPOSER_GRACE_SECONDS ({grace_seconds:g}) "
                f"+ {STOP_MARGIN_SECONDS} = {want:g}")
    return None


class TestSystemdUnit:
    def test_the_stop_timeout_is_the_grace_period_plus_the_stop_margin(self):
        """systemd waits the default grace plus the margin the last stop needs before SIGKILL."""
        text = (ROOT / "systemd" / "imposer.service").read_text()
        assert stop_timeout_problem(text, Settings.load({}).grace_seconds) is None

    @pytest.mark.parametrize("timeout, grace", [(900, 900.0), (960, 1800.0), (7200, 900.0)])
    def test_a_stop_timeout_that_disagrees_with_the_grace_fails(self, timeout, grace):
        """A timeout at the grace itself, a longer grace alone, or a timeout far above: each
        is named."""
        text = re.sub(r"TimeoutStopSec=\d+", f"TimeoutStopSec={timeout}",
                      (ROOT / "systemd" / "imposer.service").read_text())
        assert f"TimeoutStopSec={timeout}" in stop_timeout_problem(text, grace)

    def test_the_worker_unit_runs_doctor_before_the_worker(self):
        """ExecStartPre runs doctor from the same install as ExecStart, with the same settings."""
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.read(ROOT / "systemd" / "imposer.service")
        service = unit["Service"]
        assert service["ExecStartPre"] == "/opt/imposer/.venv/bin/imposer doctor"
        assert service["ExecStart"].split()[0] == service["ExecStartPre"].split()[0]
