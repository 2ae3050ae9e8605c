"""The operator commands, run as a user would: real subprocesses, real stack."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from imposer.models import JobStatus, lease_key
from tests.fixtures.aws import env_for
from tests.fixtures.jobs import record_of, request


def imposer(env, *args):
    return subprocess.run([sys.executable, "-m", "imposer", *args], env=env,
                          capture_output=True, text=True, timeout=60)


class TestErrors:
    def test_unreachable_endpoint_is_one_clear_line(self, settings):
        """With no AWS endpoint listening, commands say so in one line and exit 4."""
        env = env_for(settings)
        env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
        got = imposer(env, "leases")
        assert got.returncode == 4
        lines = got.stderr.strip().splitlines()
        assert len(lines) == 1 and "cannot reach http://127.0.0.1:9" in lines[0]
        assert "imposer local" in lines[0]

    def test_missing_table_says_run_init(self, aws_endpoint, names):
        """Against an unprovisioned prefix, commands point at `imposer init`."""
        from imposer.settings import Settings

        env = env_for(Settings.load({}, **names))
        got = imposer(env, "leases")
        assert got.returncode == 3 and "imposer init" in got.stderr
        run = imposer(env, "run", "--engine", "open")
        assert run.returncode == 3 and "does not exist" in run.stderr and "imposer init" in run.stderr

    def test_bad_setting_is_a_usage_error(self, settings):
        """A malformed IMPOSER_* value names the variable and exits 2."""
        env = env_for(settings)
        env["IMPOSER_SLOTS"] = "eight"
        got = imposer(env, "run")
        assert got.returncode == 2 and "IMPOSER_SLOTS" in got.stderr

    def test_missing_pdftoolbox_is_a_config_error(self, settings):
        """`imposer run` with the pdfToolbox engine and no binary exits 3, saying how to fix it."""
        env = env_for(settings)
        got = imposer(env, "run", "--pdftoolbox", "/nonexistent/pdfToolbox")
        assert got.returncode == 3 and "--engine open" in got.stderr


class TestOperatorViews:
    def test_leases_json_and_sweep_once(self, settings, backends):
        """`leases --json` lists live leases; `sweep --once` reports what it reclaimed."""
        from imposer.worker.wiring import connect

        settings = settings.evolve(lease_ttl_seconds=3600.0)  # expires only when we say so
        env = env_for(settings)
        backends = connect(settings)  # the subprocesses use the real clock, so do we
        lease = backends.leases.acquire(request(), "host-x", 2).lease
        rows = json.loads(imposer(env, "leases", "--json").stdout)
        assert len(rows) == 1
        row = rows[0]
        assert (row["tenant_id"], row["job_id"], row["host"], row["slot"]) == \
            ("acme", lease.job_id, "host-x", 2)
        assert row["expires_at"] == lease.expires_at
        text = imposer(env, "leases").stdout
        assert lease.job_id in text and "EXPIRES IN" in text
        swept = imposer(env, "sweep", "--once")
        assert swept.returncode == 0 and "reclaimed 0 expired lease(s)" in swept.stdout
        backends.dynamo.update(settings.leases_table,
                               {"pk": lease_key(lease.tenant_id, lease.job_id)},
                               "SET expires_at = :x", {":x": 1.0})
        swept = imposer(env, "sweep", "--once")
        assert "reclaimed 1 expired lease(s)" in swept.stdout
        assert record_of(backends, lease.job_id).status == JobStatus.QUEUED

    def test_tenants_set_and_list(self, settings, backends):
        """A tier override set from the CLI is listed and used by the next acquire."""
        env = env_for(settings)
        assert imposer(env, "tenants", "set", "acme", "--cap", "1").returncode == 0
        rows = json.loads(imposer(env, "tenants", "list", "--json").stdout)
        assert rows == [{"tenant_id": "acme", "cap": 1, "override": True, "weight": 1.0,
                         "express": False, "inflight": 0, "borrowed": 0, "webhook_hosts": [],
                         "senders": []}]
        assert backends.leases.acquire(request(), "h", 0).verdict.value == "acquired"
        assert backends.leases.acquire(request(), "h", 1).verdict.value == "at_cap"

    def test_the_express_class_is_set_listed_and_read_by_the_borrow_view(self, settings,
                                                                          backends):
        """--express puts a tenant in the class (its row says so, `tenants list` shows it),
        the worker's borrow view reads it with the tiers, and --no-express takes it out."""
        from imposer.worker.dispatch.borrowing import BorrowPolicy

        env = env_for(settings)
        done = imposer(env, "tenants", "set", "acme", "--express")
        assert done.returncode == 0 and "; class express" in done.stdout
        assert backends.tenants.get("acme").express is True
        rows = json.loads(imposer(env, "tenants", "list", "--json").stdout)
        assert [(r["tenant_id"], r["express"]) for r in rows] == [("acme", True)]
        assert "express" in imposer(env, "tenants", "list").stdout
        backends.jobs.note_waiting(request(), 0.0, "at cap")  # (work waiting: a view to read)
        view = BorrowPolicy(True, 1, backends.leases, backends.jobs, backends.tenants)
        view.refresh()
        assert view.express() == {"acme"}
        assert view.allows("acme", 1) is None and view.turns(1, {"acme": 0}) == ["acme"]
        assert BorrowPolicy(False, 1, backends.leases, backends.jobs,
                            backends.tenants).express() == frozenset()
        assert imposer(env, "tenants", "set", "acme", "--no-express").returncode == 0
        assert backends.tenants.get("acme").express is False
        view.refresh()
        assert view.allows("acme", 1) == "only 1 slot(s) free; 1 kept in reserve"

    def test_rotating_a_webhook_secret(self, settings, backends):
        """A new secret set with --keep-old-secret keeps the current one signing beside it
        until --drop-old-secret; a plain replace drops both old ones; misuse is one line on
        stderr, exit 2, and changes nothing."""
        env = env_for(settings)
        out = imposer(env, "tenants", "set", "acme", "--webhook-secret", "generate")
        first = backends.tenants.get("acme").webhook_secret
        assert out.returncode == 0 and first.startswith("whsec_") and first in out.stdout
        out = imposer(env, "tenants", "set", "acme", "--webhook-secret", "generate",
                      "--keep-old-secret")
        row = backends.tenants.get("acme")
        assert out.returncode == 0 and row.webhook_secret in out.stdout
        assert "previous one signs too, until --drop-old-secret" in out.stdout
        assert row.webhook_secret_previous == first != row.webhook_secret
        assert row.signing_secrets == (row.webhook_secret, first)
        out = imposer(env, "tenants", "set", "acme", "--drop-old-secret")
        assert out.returncode == 0 and "webhook secret set;" in out.stdout, out
        dropped = backends.tenants.get("acme")
        assert (dropped.webhook_secret, dropped.webhook_secret_previous) == \
            (row.webhook_secret, None)
        imposer(env, "tenants", "set", "acme", "--webhook-secret", "k2", "--keep-old-secret")
        imposer(env, "tenants", "set", "acme", "--webhook-secret", "k3")
        assert backends.tenants.get("acme").signing_secrets == ("k3",)
        for args, says in [(["--keep-old-secret"], "give --webhook-secret"),
                           (["--webhook-secret", "k4", "--keep-old-secret",
                             "--drop-old-secret"], "contradict"),
                           (["--webhook-secret", "k3", "--keep-old-secret"], "current one")]:
            out = imposer(env, "tenants", "set", "acme", *args)
            assert out.returncode == 2 and says in out.stderr, out
            assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        out = imposer(env, "tenants", "set", "beta", "--webhook-secret", "k", "--keep-old-secret")
        assert out.returncode == 2 and "no webhook secret to keep" in out.stderr, out
        assert backends.tenants.get("acme").signing_secrets == ("k3",)
        assert backends.tenants.get("beta") is None

    def test_tenants_set_weight(self, settings, backends):
        """A fair-share weight set from the CLI is stored, listed and read by the workers'
        store; clearing it gives the tenant weight 1 again, its cap untouched."""
        env = env_for(settings)
        out = imposer(env, "tenants", "set", "acme", "--cap", "3", "--weight", "2.5")
        assert out.returncode == 0 and out.stdout.strip().endswith("weight 2.5"), out
        rows = json.loads(imposer(env, "tenants", "list", "--json").stdout)
        assert (rows[0]["cap"], rows[0]["weight"]) == (3, 2.5)
        assert backends.tenants.weight_for("acme") == 2.5
        assert "weight 0 (paused under fair share)" in imposer(
            env, "tenants", "set", "acme", "--weight", "0").stdout
        assert imposer(env, "tenants", "set", "acme", "--clear-weight").returncode == 0
        row = backends.tenants.get("acme")
        assert (row.weight, row.cap) == (None, 3)

    @pytest.mark.parametrize("weight", ["-1", "heavy", "nan", "inf", "2e6"])
    def test_a_bad_weight_is_one_line_and_changes_nothing(self, settings, backends, weight):
        """A weight that is no number from 0 to a million is refused in one line on stderr,
        exit 2, and the tenant's row is left as it was."""
        env = env_for(settings)
        assert imposer(env, "tenants", "set", "acme", "--weight", "2").returncode == 0
        out = imposer(env, "tenants", "set", "acme", "--weight", weight)
        assert out.returncode == 2, out
        assert len(out.stderr.strip().splitlines()) == 1 and "--weight" in out.stderr
        assert backends.tenants.get("acme").weight == 2.0

    def test_help_explains_settings(self):
        """`run --help` documents each setting with its variable and default."""
        got = subprocess.run([sys.executable, "-m", "imposer", "run", "--help"],
                             capture_output=True, text=True)
        text = " ".join(got.stdout.split())
        assert "[env IMPOSER_DEFAULT_CAP; default: 4]" in text
        assert "[env IMPOSER_LEASE_TTL_SECONDS; default: 600.0]" in text
        assert "second one stops fast" in text


class TestSubmitCommand:
    def test_submit_then_jobs(self, settings, backends, tmp_path, redis_url):
        """`imposer submit` publishes with the tenant as group; a reused token exits 10."""
        from imposer.dev.samples import A5, numbered_pdf

        pdf = numbered_pdf(tmp_path / "a.pdf", 2, *A5)
        env = env_for(settings)
        env["IMPOSER_REDIS_URL"] = redis_url
        first = imposer(env, "submit", "--tenant", "acme", "--pdf", str(pdf), "--layout",
                        "a5-4up-sra3", "--token", "order-1")
        assert first.returncode == 0, first.stderr
        assert "submitted job" in first.stdout
        again = imposer(env, "submit", "--tenant", "acme", "--pdf", str(pdf), "--layout",
                        "a5-4up-sra3", "--token", "order-1")
        assert again.returncode == 10
        assert again.stderr.strip().splitlines()[-1].startswith("imposer: error: ")
        assert "order-1" in again.stderr
        import boto3

        sqs = boto3.client("sqs")
        url = sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
        got = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"],
                                  MaxNumberOfMessages=10)["Messages"]
        assert len(got) == 1 and got[0]["Attributes"]["MessageGroupId"] == "acme"

    def test_unreachable_redis_is_one_clear_line(self, settings, tmp_path):
        """With admission configured but Redis down, submit says so and exits 4, publishing nothing."""
        from imposer.dev.samples import A5, numbered_pdf

        env = env_for(settings)
        env["IMPOSER_REDIS_URL"] = "redis://127.0.0.1:9/0"
        pdf = numbered_pdf(tmp_path / "a.pdf", 1, *A5)
        got = imposer(env, "submit", "--tenant", "acme", "--pdf", str(pdf), "--layout",
                      "a5-4up-sra3")
        lines = got.stderr.strip().splitlines()
        assert got.returncode == 4 and len(lines) == 1, got.stderr
        assert lines[0].startswith("imposer: error: admission control cannot admit a job: ")
        assert lines[0].endswith("(IMPOSER_REDIS_URL redis://127.0.0.1:9/0)")

    def test_jobs_lists_records(self, settings, backends):
        """`imposer jobs --json` lists records with their status and reason."""
        lease = backends.leases.acquire(request(), "h", 0).lease
        backends.leases.release(lease, JobStatus.FAILED, error="bad pdf: truncated")
        rows = json.loads(imposer(env_for(settings), "jobs", "--json", "--tenant", "acme").stdout)
        assert [(r["job_id"], r["status"], r["error"]) for r in rows] == \
            [(lease.job_id, "failed", "bad pdf: truncated")]
        text = imposer(env_for(settings), "jobs", "--tenant", "acme").stdout
        assert "bad pdf: truncated" in text
        assert "no open jobs" in imposer(env_for(settings), "jobs").stdout


PIKEPDF = re.compile(r"\|\s+pikepdf(\.|$)", re.M)


class TestStartUp:
    def imported(self, *args: str) -> str:
        env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
        return subprocess.run([sys.executable, "-X", "importtime", "-m", "imposer", *args],
                              env=env, capture_output=True, text=True, timeout=60).stderr

    def test_operator_commands_leave_the_engine_alone(self):
        """`leases` and other operator commands never import pikepdf: they start fast."""
        for args in (["leases", "--help"], ["leases"], ["jobs", "--help"], ["--help"]):
            assert not PIKEPDF.search(self.imported(*args)), args

    def test_engine_commands_do_import_it(self):
        """The check above can fail: `layouts` imports pikepdf."""
        assert PIKEPDF.search(self.imported("layouts"))

    def test_version(self):
        """`imposer --version` names the package version, newer than the one the upgrade guide
        (docs/deploy-on-aws.rst) upgrades from."""
        from pathlib import Path

        from imposer import __version__

        got = subprocess.run([sys.executable, "-m", "imposer", "--version"], capture_output=True,
                             text=True)
        assert got.returncode == 0 and got.stdout.strip() == f"imposer, version {__version__}"
        guide = (Path(__file__).resolve().parents[2] / "docs" / "deploy-on-aws.rst").read_text()
        older = re.search(r"^Upgrading from imposer (\d+)\.(\d+)$", guide, re.M).groups()
        assert tuple(int(n) for n in __version__.split(".")[:2]) > tuple(int(n) for n in older)


class TestWrongEndpoint:
    def test_an_endpoint_that_answers_html_is_one_line(self, settings):
        """A web server where AWS should be is named as such, not dumped as HTML."""
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Html(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = b"<!doctype html><html><body><h1>Not Found</h1></body></html>"
                self.send_response(404)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Html)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            env = env_for(settings)
            env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{server.server_port}"
            got = imposer(env, "tenants", "list")
        finally:
            server.shutdown()
        lines = got.stderr.strip().splitlines()
        assert got.returncode == 4 and len(lines) == 1, got.stderr
        assert "with a web page, not an AWS API reply" in lines[0] and "<html>" not in lines[0]

    def test_a_malformed_endpoint_is_a_configuration_error(self, settings):
        """AWS_ENDPOINT_URL without a scheme says what it wants, exit 3, no traceback."""
        env = env_for(settings)
        env["AWS_ENDPOINT_URL"] = "127.0.0.1:45123"
        got = imposer(env, "tenants", "list")
        assert got.returncode == 3 and "Traceback" not in got.stderr
        assert "is not a URL like http://" in got.stderr


class TestStatusTellsTheTruth:
    def test_messages_not_received_yet_are_counted(self, settings, backends):
        """Right after submitting, `jobs`, `stats` and `why` say how many messages wait in the
        queue with no record yet, instead of "no open jobs" alone."""
        body = json.dumps({"version": 1, "job_id": "j1", "tenant_id": "acme"})
        for _ in range(3):
            backends.queue.send(body, "acme")
        env = env_for(settings)
        jobs = imposer(env, "jobs")
        assert jobs.returncode == 0 and "no open jobs" in jobs.stdout
        assert "queue: 3 message(s) not received by a worker yet" in jobs.stdout
        stats = imposer(env, "stats", "--json")
        assert json.loads(stats.stdout)["queue"] == {"not_received": 3}
        why = imposer(env, "why", "j1")
        assert why.returncode == 1 and "queue: 3 message(s) not received" in why.stdout

    def test_stats_says_how_far_behind_the_rollups_are(self, settings, backends, clock):
        """`stats` reports when the newest rollup was written and how often hosts write them."""
        from imposer.cli.reports import run_stats
        from imposer.worker.threads.rollup import RollupRecorder

        recorder = RollupRecorder(backends.rollups, "h", 8, clock)
        recorder.job_finished("acme", "succeeded", clock.time() - 5, clock.time())
        assert recorder.flush() == 1
        lines: list[str] = []
        data = run_stats(settings, 86400, False, lines.append, now=clock.time() + 42)
        assert data["rollups"]["age_seconds"] == 42.0
        assert any(line.startswith("rollups      newest written 42.0s ago; hosts write every")
                   for line in lines), lines
