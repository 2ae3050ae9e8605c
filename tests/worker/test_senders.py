"""Sender identity: a message is only as much a tenant's as SQS's SenderId says.

Two IAM users of the local stack (which stamps SenderId as SQS does, see
``imposer.dev.localstack.stack``) play tenant-a and tenant-b; tenant-b's row binds
its user. What tenant-a sends in tenant-b's name is dead-lettered once and
recorded nowhere; tenant-b's jobs, including the ones the worker re-publishes
under its own principal, run.
"""

from __future__ import annotations

import json

import boto3
import pytest
from click.testing import CliRunner

from imposer.cli import main
from imposer.client import submit
from imposer.client.aws import Aws
from imposer.clock import ManualClock
from imposer.errors import ConfigError, SenderRefused
from imposer.models import TenantConfig
from imposer.models.senders import parse_senders, sender_matches
from imposer.worker.receive.senders import SenderCheck
from tests.fixtures.aws import env_for
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import Worker, layout


def principal(name: str) -> tuple[str, boto3.session.Session]:
    """Make an IAM user on the local stack; return its UserId and a session with its keys."""
    iam = boto3.session.Session().client("iam")
    user_id = iam.create_user(UserName=name)["User"]["UserId"]
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return user_id, boto3.session.Session(aws_access_key_id=key["AccessKeyId"],
                                          aws_secret_access_key=key["SecretAccessKey"],
                                          region_name="us-east-1")


@pytest.fixture
def users(aws_endpoint, names):
    """Two principals of their own for this test (IAM user names are account-wide)."""
    return {t: principal(f"{t}-{names['bucket']}") for t in ("tenant-a", "tenant-b")}


def check(backends, *, trusted: str = "", require: bool = False,
          me: str = "AROAWORKER:i-0host1") -> SenderCheck:
    return SenderCheck(backends.tenants, trusted=trusted, require=require, whoami=lambda: me)


class TestSenderMatching:
    def test_a_role_id_binds_every_session_and_a_session_only_itself(self):
        """AROA.. matches AROA..:any; AROA..:s matches only s; a user id only itself."""
        assert sender_matches(["AROAX"], "AROAX:i-1") and sender_matches(["AROAX:i-1"], "AROAX:i-1")
        assert not sender_matches(["AROAX:i-1"], "AROAX:i-2")
        assert not sender_matches(["AIDAB"], "AIDABC") and not sender_matches(["AIDAB"], None)

    def test_a_malformed_entry_is_named(self):
        """A list with an ARN in it is refused, naming the entry."""
        with pytest.raises(ValueError, match="arn:aws:iam::1:user/x"):
            parse_senders("AIDAOK, arn:aws:iam::1:user/x")


class TestSenderCheck:
    def test_an_unbound_tenant_takes_anyone_unless_senders_are_required(self, backends):
        """No binding, no requirement: anyone, as before; with IMPOSER_REQUIRE_SENDERS only
        the trusted."""
        check(backends).check("acme", "AIDASTRANGER")
        with pytest.raises(SenderRefused, match="no bound sender"):
            check(backends, require=True).check("acme", "AIDASTRANGER")
        check(backends, require=True, trusted="AROAFRONTDOOR").check("acme", "AROAFRONTDOOR:web-1")

    def test_a_bound_tenant_takes_its_senders_the_trusted_and_the_workers(self, backends):
        """Bound senders, trusted front doors and any session of the worker's role pass."""
        backends.tenants.put(TenantConfig(tenant_id="acme", senders=("AIDAACME",)))
        gate = check(backends, trusted="AROAFRONTDOOR")
        for sender in ("AIDAACME", "AROAFRONTDOOR:web-2", "AROAWORKER:i-0host2"):
            gate.check("acme", sender)
        with pytest.raises(SenderRefused, match="AIDAOTHER is not bound to tenant 'acme'"):
            gate.check("acme", "AIDAOTHER")

    def test_a_binding_is_seen_within_the_cache_time(self, settings):
        """A worker caching tenants' rows sees a new binding once its cache time has passed."""
        from imposer.worker.wiring import connect

        clock = ManualClock()
        backends = connect(settings.evolve(cap_cache_seconds=5.0), clock=clock)
        gate = check(backends)
        gate.check("acme", "AIDAOTHER")
        backends.tenants.dynamo.put(settings.tenants_table,
                                    {"tenant_id": "acme", "senders": ["AIDAACME"]})
        gate.check("acme", "AIDAOTHER")  # cached: still unbound
        clock.advance(5.1)
        with pytest.raises(SenderRefused):
            gate.check("acme", "AIDAOTHER")

    def test_a_malformed_trusted_list_is_a_config_error(self, backends):
        """IMPOSER_TRUSTED_SENDERS with an ARN in it stops the worker with the variable named."""
        with pytest.raises(ConfigError, match="IMPOSER_TRUSTED_SENDERS"):
            check(backends, trusted="arn:aws:iam::123456789012:role/front")


class TestTenantsSetSender:
    def test_senders_are_bound_listed_and_cleared(self, settings, backends):
        """--sender replaces the list, tenants list shows it, --clear-senders empties it."""
        runner, env = CliRunner(), env_for(settings)
        out = runner.invoke(main, ["tenants", "set", "acme", "--sender", "AIDAONE",
                                   "--sender", "AROATWO"], env=env)
        assert out.exit_code == 0 and "senders AIDAONE, AROATWO" in out.output, out.output
        rows = json.loads(runner.invoke(main, ["tenants", "list", "--json"], env=env).output)
        assert [r["senders"] for r in rows] == [["AIDAONE", "AROATWO"]]
        out = runner.invoke(main, ["tenants", "set", "acme", "--clear-senders"], env=env)
        assert "senders none bound" in out.output
        assert backends.tenants.get("acme").senders == ()

    def test_an_arn_is_refused_with_what_to_give_instead(self, settings):
        """An ARN given as --sender exits 2 and says where the unique id is printed."""
        out = CliRunner().invoke(main, ["tenants", "set", "acme", "--sender",
                                        "arn:aws:iam::1:user/acme"], env=env_for(settings))
        assert out.exit_code == 2 and "aws iam get-user" in out.output, out.output


class TestForgedTenant:
    def test_tenant_a_cannot_start_a_job_as_tenant_b(self, settings, backends, users, tmp_path):
        """Tenant-a's messages naming tenant-b (a new job on b's artwork, a replay of b's own,
        a malformed body with a webhook of a's choosing) are dead-lettered once, unrecorded;
        tenant-b's jobs run, re-published ones too."""
        (id_b, as_b), (_, as_a) = users["tenant-b"], users["tenant-a"]
        backends.tenants.put(TenantConfig(tenant_id="tenant-b", cap=1, senders=(id_b,)))
        pdf = numbered_pdf(tmp_path / "art.pdf", 2)
        common = {"bucket": settings.bucket, "queue": settings.queue_name}
        genuine = [submit("tenant-b", pdf, layout(), aws=Aws(session=as_b), **common)
                   for _ in range(2)]
        body = json.loads(genuine[0].to_body())
        forged = dict(body, job_id="f" * 32,
                      output=body["output"].replace(body["job_id"], "f" * 32))
        malformed = dict(forged, job_id="e" * 32, webhook="https://attacker.example/hook",
                         output=body["output"].replace(body["job_id"], "e" * 32),
                         layout={"version": 1, "kind": "nup",
                                 "sheet": {"width": float("nan"), "height": 1}})
        sqs_a = as_a.client("sqs")
        url = sqs_a.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
        for sent in (forged, body, malformed):  # a's job, a replay of b's, an invalid one
            sqs_a.send_message(QueueUrl=url, MessageBody=json.dumps(sent),
                               MessageGroupId="tenant-b")
        worker = Worker(settings, tmp_path, "h1", "--exit-when-idle", env={
            "IMPOSER_REPUBLISH_MARGIN_SECONDS": str(int(settings.retention_seconds))})
        try:
            assert worker.wait(120) == 0, worker.tail()
        finally:
            worker.close()
        refused = worker.actions("sender_refused")
        assert len(refused) == len({r["message_id"] for r in refused}) == 3, worker.tail()
        assert {(r["claimed_tenant"], r["tenant_id"], r["job_id"]) for r in refused} == {
            ("tenant-b", None, None)}
        assert worker.actions("republished"), "no re-publish by the worker was vetted"
        assert [backends.jobs.get("tenant-b", r.job_id).status.value for r in genuine] == [
            "succeeded", "succeeded"]
        assert backends.jobs.get("tenant-b", forged["job_id"]) is None
        assert backends.jobs.get("tenant-b", malformed["job_id"]) is None  # nor its event
        sqs = boto3.session.Session().client("sqs")
        dlq = sqs.get_queue_url(QueueName=settings.dlq_name)["QueueUrl"]
        dead = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10,
                                   MessageAttributeNames=["All"]).get("Messages", [])
        assert sorted(json.loads(m["Body"])["job_id"] for m in dead) == sorted(
            [forged["job_id"], body["job_id"], malformed["job_id"]])
        assert all("is not bound to tenant 'tenant-b'" in
                   m["MessageAttributes"]["imposer_error"]["StringValue"] for m in dead)
