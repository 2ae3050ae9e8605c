"""Least privilege, proven on the local stack with IAM enforced.

One scenario runs under users whose policies are exactly the template's
statements: the tenants submit under TenantPolicyExample (tenant-a also
sends a message in tenant-b's name), the worker runs jobs (a cap deferral, a
re-publish, a bad PDF, an invalid message, a forged sender, webhooks) and
the read-only commands under WorkerPolicy, and the operator `tenants set`,
`jobs --export` and `init` under WorkerPolicy + OperatorPolicy. The stack
writes down every authorization verdict (tests/deploy/iam_stack.py), so the
tests can say "nothing the code did was denied", "nothing granted went
unused", and "no grant reaches a resource no call needed".
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import attrs
import boto3
import botocore.exceptions
import pytest
from click.testing import CliRunner

from imposer.aws import session
from imposer.cli import main
from imposer.client import submit
from imposer.client.aws import Aws
from imposer.client.errors import SubmitError
from imposer.client.receiver import WebhookReceiver
from imposer.dev.samples import numbered_pdf
from imposer.settings import Settings
from imposer.state.provision import provision
from tests.deploy.conftest import (ANYONE, ROOT, Identity, aws_as, create_user,
                                   tenant_statements)
from tests.deploy.template import Stack
from tests.fixtures.workers import layout, wait_for

pytestmark = pytest.mark.slow

TENANTS = ("tenant-a", "tenant-b")
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#: Test-sized timings; a cap of 1 for tenant-a and a re-publish margin as long as the
#: retention make a deferred message go through every queue path.
TIMINGS = {"IMPOSER_HEARTBEAT_SECONDS": "0.5", "IMPOSER_LEASE_TTL_SECONDS": "5",
           "IMPOSER_DEFER_SECONDS": "0.3", "IMPOSER_SWEEP_SECONDS": "0.5",
           "IMPOSER_POLL_SECONDS": "1", "IMPOSER_RETRY_SECONDS": "0",
           "IMPOSER_REPUBLISH_MARGIN_SECONDS": "1209600", "IMPOSER_ROLLUP_SECONDS": "0.5",
           "IMPOSER_WEBHOOK_POLL_SECONDS": "0.2", "IMPOSER_HOST_ID": "iam-host",
           "IMPOSER_ENGINE": "open", "IMPOSER_WEBHOOK_ALLOW_LOOPBACK": "1"}

#: Grants of WorkerPolicy this scenario cannot reach, and why each is needed all the same.
UNEXERCISED = {
    ("s3:AbortMultipartUpload", "attempts/*"):
        "boto3's transfer manager aborts a failed multipart upload of a plate over 8 MB",
}

#: IAM actions an API call needs, where they are not ``service:Operation``. A transaction
#: needs one of its item actions per item; the IAM stack checks them item by item.
OPERATION_ACTIONS = {
    "dynamodb.TransactWriteItems": ("dynamodb:PutItem", "dynamodb:UpdateItem",
                                    "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"),
    "s3.HeadObject": ("s3:GetObject",),
    "s3.HeadBucket": ("s3:ListBucket",),
    "s3.CopyObject": ("s3:GetObject", "s3:PutObject"),
    "s3.GetBucketLifecycleConfiguration": ("s3:GetLifecycleConfiguration",),
    "s3.GetBucketEncryption": ("s3:GetEncryptionConfiguration",),
    "s3.GetPublicAccessBlock": ("s3:GetBucketPublicAccessBlock",),
    "s3.CreateMultipartUpload": ("s3:PutObject",),
    "s3.UploadPart": ("s3:PutObject",),
    "s3.CompleteMultipartUpload": ("s3:PutObject",),
    "sts.GetCallerIdentity": (),  # needs no permission
}


def iam_actions(operation: str) -> tuple[str, ...]:
    service, name = operation.split(".", 1)
    return OPERATION_ACTIONS.get(operation, (f"{service}:{name}",))


def matches(pattern: str, value: str) -> bool:
    """IAM's wildcard match of an Action or Resource element."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), value) is not None


def granted(statements: list[dict], action: str, resource: str = "*") -> bool:
    for st in statements:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        if st["Effect"] == "Allow" and any(matches(a, action) for a in actions) and (
                resource == "*" or any(matches(r, resource) for r in resources)):
            return True
    return False


@attrs.define
class Scenario:
    """What happened when the worker and the tenants worked under the template's policies."""

    deployed: Stack
    settings: Settings
    worker: Identity
    #: Holds WorkerPolicy and OperatorPolicy.
    operator: Identity
    tenants: dict[str, Identity]
    #: Holds WorkerPolicy too; only the tests' deliberate out-of-policy calls use it.
    prober: Identity
    jobs: dict[str, str] = attrs.Factory(dict)
    commands: dict[str, object] = attrs.Factory(dict)
    worker_exit: int | None = None
    worker_log: list[dict] = attrs.Factory(list)
    #: AWS calls the commands run as the worker made in this process, and as the operator.
    in_process_calls: dict[str, int] = attrs.Factory(dict)
    operator_calls: dict[str, int] = attrs.Factory(dict)
    webhooks: list[dict] = attrs.Factory(list)
    tenant_tries: dict[str, str] = attrs.Factory(dict)


#: How a denial reads: moto answers JSON-protocol services in XML, which botocore sees as 403.
DENIED = {"403", "AccessDenied", "AccessDeniedException"}


def client_error(call) -> str:
    """Run *call*; return "ok", "AccessDenied", or the AWS error code it failed with."""
    try:
        call()
    except botocore.exceptions.ClientError as exc:
        code = exc.response["Error"]["Code"]
        return "AccessDenied" if code in DENIED else code
    except SubmitError as exc:
        return "AccessDenied" if "AccessDenied" in str(exc) else str(exc)
    return "ok"


@pytest.fixture(scope="module")
def scenario(iam_stack, tmp_path_factory) -> Scenario:
    """Provision, create the users from the template, enforce IAM, then work as each of them."""
    tmp = tmp_path_factory.mktemp("scenario")
    tag = uuid.uuid4().hex[:8]
    deployed = Stack({"QueueName": f"q-{tag}", "DlqName": f"q-{tag}-dlq",
                      "TablePrefix": f"t-{tag}", "BucketName": f"b-{tag}", "Slots": 2,
                      "DefaultCap": 2})
    env = dict(line.split("=", 1) for line in deployed.output("EnvFile").splitlines())
    env.update(TIMINGS)
    settings = Settings.load(env)
    with aws_as(iam_stack.url, ANYONE):
        provision(settings)
        iam = boto3.session.Session().client("iam")
        result = Scenario(
            deployed=deployed, settings=settings,
            worker=create_user(iam, "imposer-worker", deployed.statements("WorkerPolicy")),
            operator=create_user(iam, "imposer-operator", deployed.statements("WorkerPolicy")
                                 + deployed.statements("OperatorPolicy")),
            tenants={t: create_user(iam, t, tenant_statements(deployed, t), t) for t in TENANTS},
            prober=create_user(iam, "imposer-prober", deployed.statements("WorkerPolicy")))
    iam_stack.enforce()
    runner = CliRunner()

    def imposer(name: str, *args: str):
        outcome = runner.invoke(main, list(args), env=env, catch_exceptions=False)
        result.commands[name] = outcome
        return outcome

    receiver = WebhookReceiver({"tenant-a": SECRET}).start()
    try:
        with aws_as(iam_stack.url, result.operator):
            before = session.CALLS.snapshot()
            imposer("tenants set", "tenants", "set", "tenant-a", "--cap", "1",
                    "--webhook-secret", SECRET, "--webhook-host", "127.0.0.1",
                    "--sender", result.tenants["tenant-a"].user_id)
            imposer("tenants set tenant-b", "tenants", "set", "tenant-b",
                    "--sender", result.tenants["tenant-b"].user_id)
            after = session.CALLS.snapshot()
        operator_calls = _delta(before, after)
        with aws_as(iam_stack.url, result.worker):
            before = session.CALLS.snapshot()
            imposer("doctor", "doctor")
        submit_jobs(result, iam_stack.url, tmp, receiver)
        result.worker_exit = run_worker({**_base_env(), **env,
                                         "IMPOSER_WORK_DIR": str(tmp / "work"),
                                         **result.worker.env(iam_stack.url)}, tmp / "worker.log")
        result.worker_log = [json.loads(line) for line in (tmp / "worker.log").read_text()
                             .splitlines() if line.startswith("{")]
        wait_for(lambda: len(receiver.events) >= 2, 20, "both webhooks")
        result.webhooks = list(receiver.events)
        with aws_as(iam_stack.url, result.worker):
            operate(result, imposer, tmp)
            after = session.CALLS.snapshot()
        result.in_process_calls = _delta(before, after)
        with aws_as(iam_stack.url, result.operator):
            before = session.CALLS.snapshot()
            imposer("jobs --export", "jobs", "--export")
            imposer("init --check", "init", "--check")
            imposer("init", "init")
            after = session.CALLS.snapshot()
        result.operator_calls = _merge(operator_calls, _delta(before, after))
        with aws_as(iam_stack.url, result.tenants["tenant-a"]):
            s3 = boto3.session.Session().client("s3")
            own = f"tenants/tenant-a/jobs/{result.jobs['webhook-1']}/plate.pdf"
            result.tenant_tries["get own plate"] = client_error(
                lambda: s3.get_object(Bucket=settings.bucket, Key=own))
    finally:
        receiver.stop()
    return result


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}


def _merge(one: dict[str, int], other: dict[str, int]) -> dict[str, int]:
    return {k: one.get(k, 0) + other.get(k, 0) for k in set(one) | set(other)}


def run_worker(env: dict[str, str], log_path: Path) -> int:
    """Run `imposer run --exit-when-idle` to its end; kill its process group if it hangs."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "imposer", "run", "--exit-when-idle"],
                                env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            raise AssertionError("the worker did not finish in 180 s") from None


def _base_env() -> dict[str, str]:
    """This process's environment without any AWS identity or imposer setting."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "IMPOSER_"))}


def submit_jobs(result: Scenario, url: str, tmp: Path, receiver: WebhookReceiver) -> None:
    """Each tenant submits under its own policy; tenant-a also tries the other's prefix."""
    s = result.settings
    pdf = numbered_pdf(tmp / "art.pdf", 2)
    bad = tmp / "bad.pdf"
    bad.write_bytes(b"%PDF-1.7 not really")
    layout_file = tmp / "layout.json"
    layout_file.write_text(json.dumps(layout()))
    common = {"bucket": s.bucket, "queue": s.queue_name}
    # tenant-a's jobs first: the worker's first receive (two slots, both groups with none in
    # flight, so in send order) brings two of them, and tenant-a at cap 1 is deferred then,
    # whatever the machine's load makes of the run times after it
    with aws_as(url, result.tenants["tenant-a"]):
        aws = Aws()
        for name in ("webhook-1", "webhook-2"):
            result.jobs[name] = submit("tenant-a", pdf, layout(), aws=aws, **common,
                                       webhook=receiver.url("tenant-a")).job_id
        result.jobs["layout-file"] = submit("tenant-a", pdf, layout_file, aws=aws,
                                            **common).job_id
        result.jobs["bad-pdf"] = submit("tenant-a", bad, layout(), aws=aws, **common).job_id
    with aws_as(url, result.tenants["tenant-b"]):
        result.jobs["b-1"] = submit("tenant-b", pdf, layout(), aws=Aws(), **common).job_id
    with aws_as(url, result.tenants["tenant-a"]):
        s3 = boto3.session.Session().client("s3")
        other = f"tenants/tenant-b/jobs/{result.jobs['b-1']}/input.pdf"
        result.tenant_tries["put into tenant-b"] = client_error(lambda: s3.put_object(
            Bucket=s.bucket, Key="tenants/tenant-b/jobs/x/input.pdf", Body=b"%PDF"))
        result.tenant_tries["get from tenant-b"] = client_error(
            lambda: s3.get_object(Bucket=s.bucket, Key=other))
        result.tenant_tries["submit as tenant-b"] = client_error(
            lambda: submit("tenant-b", pdf, layout(), aws=aws, **common))
        # A message naming tenant-b's artwork: the worker must refuse it unread. And the
        # same artwork in a message sent in tenant-b's name: SQS lets it through (the tenant
        # policy may send), the worker refuses it by its SenderId.
        for name, tenant in (("invalid", "tenant-a"), ("forged", "tenant-b")):
            job = uuid.uuid4().hex
            aws.send(s.queue_name, json.dumps({
                "version": 1, "job_id": job, "tenant_id": tenant,
                "input": f"s3://{s.bucket}/{other}", "layout": layout(),
                "output": f"s3://{s.bucket}/tenants/{tenant}/jobs/{job}/plate.pdf"}),
                group_id=tenant)
            result.jobs[name] = job


def operate(result: Scenario, imposer, tmp: Path) -> None:
    """Every read-only command a host runs, under the worker's policy."""
    imposer("sweep", "sweep", "--once")
    imposer("leases", "leases", "--json")
    imposer("jobs", "jobs")
    listed = imposer("jobs --tenant", "jobs", "--tenant", "tenant-a", "--json")
    imposer("jobs --tenant tenant-b", "jobs", "--tenant", "tenant-b", "--json")
    imposer("why", "why", result.jobs["webhook-1"])
    imposer("stats", "stats")
    imposer("capacity", "capacity")
    imposer("tenants list", "tenants", "list")
    imposer("webhooks list", "webhooks", "list")
    event = next(r["webhook_event"] for r in json.loads(listed.output)
                 if r["job_id"] == result.jobs["webhook-1"])
    imposer("webhooks redeliver", "webhooks", "redeliver", event)
    imposer("fetch", "fetch", result.jobs["webhook-1"], "-o", str(tmp / "plate.pdf"))
    imposer("doctor --json", "doctor", "--json")


def status_of(result: Scenario, name: str) -> str:
    rows = [r for key in ("jobs --tenant", "jobs --tenant tenant-b")
            for r in json.loads(result.commands[key].output)]
    return next(r["status"] for r in rows if r["job_id"] == result.jobs[name])


def statement_list(value) -> list:
    return value if isinstance(value, list) else [value]


def unused_grants(stack: Stack, policy: str, used: list[dict]) -> list[tuple[str, str]]:
    """Each (action, resource) *policy* grants that no allowed call in *used* needed."""
    bucket = stack.getatt("Bucket", "Arn")
    unused = []
    for st in stack.statements(policy):
        for action in statement_list(st["Action"]):
            for resource in statement_list(st["Resource"]):
                if any(d["action"] == action and matches(resource, d["resource"])
                       for d in used):
                    continue
                if (action, resource.removeprefix(bucket + "/")) not in UNEXERCISED:
                    unused.append((action, resource))
    return unused


def resource_classes(stack: Stack) -> list[str]:
    """Every resource a grant could reach, one of each kind: the stack's tables, indexes,
    queues, bucket and top-level prefixes, and the same kinds that are not the stack's."""
    arn = f"arn:aws:dynamodb:{stack.region}:{stack.account}:table/"
    out = []
    for logical, props in stack.of_type("AWS::DynamoDB::Table").items():
        table = stack.getatt(logical, "Arn")
        out += [table] + [f"{table}/index/{i['IndexName']}"
                          for i in props.get("GlobalSecondaryIndexes", [])]
    out += [stack.getatt(q, "Arn") for q in stack.of_type("AWS::SQS::Queue")]
    bucket = stack.getatt("Bucket", "Arn")
    out += [bucket] + [f"{bucket}/{top}/x" for top in ("tenants", "attempts", "elsewhere")]
    return out + [f"{arn}foreign", f"{arn}foreign/index/i",
                  f"arn:aws:sqs:{stack.region}:{stack.account}:foreign",
                  "arn:aws:s3:::foreign", "arn:aws:s3:::foreign/tenants/x"]


def class_of(resource: str) -> str:
    """The member of ``resource_classes`` a judged resource belongs to (an object: its prefix)."""
    if resource.startswith("arn:aws:s3:::") and "/" in resource:
        bucket, key = resource.removeprefix("arn:aws:s3:::").split("/", 1)
        return f"arn:aws:s3:::{bucket}/{key.split('/', 1)[0]}/x"
    return resource


def too_wide(stack: Stack, policy: str, used: list[dict]) -> list[tuple[str, str, str]]:
    """(Sid, action, resource) for each resource a grant of *policy* reaches that no allowed
    call of that action in *used* needed: a table, queue, bucket or prefix too many."""
    bucket = stack.getatt("Bucket", "Arn")
    needed = {(d["action"], class_of(d["resource"])) for d in used}
    needed |= {(action, f"{bucket}/{short.removesuffix('/*')}/x")
               for action, short in UNEXERCISED}
    out = []
    for st in stack.statements(policy):
        for action in statement_list(st["Action"]):
            for pattern in statement_list(st["Resource"]):
                out += [(st.get("Sid", "?"), action, cls) for cls in resource_classes(stack)
                        if matches(pattern, cls) and (action, cls) not in needed]
    return out


def mutated(stack: Stack, policy: str, sid: str, **changes) -> Stack:
    """*stack* with one statement of *policy* changed (Resource or Action)."""
    template = copy.deepcopy(stack.template)
    for st in template["Resources"][policy]["Properties"]["PolicyDocument"]["Statement"]:
        if st["Sid"] == sid:
            st.update(changes)
    return Stack(stack.parameters, template=template)


#: Who each policy is judged on: the worker alone, and the operator (who holds both).
HOLDERS = {"WorkerPolicy": "worker", "OperatorPolicy": "operator"}


class TestWorkerPolicy:
    def test_the_worker_runs_every_kind_of_job_under_it(self, scenario):
        """Jobs with inline and file layouts succeed and a bad PDF fails; the worker exits 0."""
        assert scenario.worker_exit == 0, scenario.worker_log[-5:]
        assert {n: status_of(scenario, n) for n in ("webhook-1", "webhook-2", "layout-file",
                                                   "bad-pdf", "b-1")} == {
            "webhook-1": "succeeded", "webhook-2": "succeeded", "layout-file": "succeeded",
            "bad-pdf": "failed", "b-1": "succeeded"}
        assert [e["status"] for e in scenario.webhooks] == ["succeeded", "succeeded"]

    def test_the_scenario_went_through_deferral_republish_and_dead_letter(self, scenario):
        """Tenant-a at cap 1 was deferred and re-published; the invalid and the forged
        messages were dead-lettered."""
        actions = {r.get("action") for r in scenario.worker_log}
        assert {"cap_defer", "republished", "invalid_message", "sender_refused"} <= actions, \
            sorted(a for a in actions if a)

    def test_operator_commands_succeed_under_it(self, scenario):
        """sweep, leases, jobs, why, stats, capacity, tenants, webhooks, fetch, doctor exit 0
        under WorkerPolicy; tenants set, jobs --export and init under OperatorPolicy too."""
        failed = {name: (r.exit_code, r.output[-300:]) for name, r in scenario.commands.items()
                  if r.exit_code != 0}
        assert failed == {}
        assert "nothing was changed" in scenario.commands["init"].output
        assert "nothing was changed" in scenario.commands["init --check"].output

    @pytest.mark.parametrize("who", ["worker", "operator"])
    def test_nothing_the_worker_or_operator_did_was_denied(self, scenario, iam_stack, who):
        """Every call of the parent, its pool children and the commands was allowed."""
        mine = iam_stack.decisions(getattr(scenario, who).arn)
        assert mine, f"the IAM stack judged nothing for the {who}"
        assert [d for d in mine if not d["allowed"]] == []
        if who == "worker":
            assert any(d["action"] == "s3:PutObject" and "/attempts/" in d["resource"]
                       for d in mine), "no pool child upload was judged"

    @pytest.mark.parametrize("policy", sorted(HOLDERS))
    def test_every_grant_is_used(self, scenario, iam_stack, policy):
        """Each action on each resource the policy grants was called, or is listed with a reason."""
        used = [d for d in iam_stack.decisions(getattr(scenario, HOLDERS[policy]).arn)
                if d["allowed"]]
        assert unused_grants(scenario.deployed, policy, used) == []

    @pytest.mark.parametrize("policy", sorted(HOLDERS))
    def test_no_grant_reaches_a_resource_no_call_needed(self, scenario, iam_stack, policy):
        """Each grant reaches only the tables, indexes, queues, bucket and prefixes its action
        was judged on: not another table, queue, bucket, prefix, or anything not the stack's."""
        used = [d for d in iam_stack.decisions(getattr(scenario, HOLDERS[policy]).arn)
                if d["allowed"]]
        assert too_wide(scenario.deployed, policy, used) == []

    @pytest.mark.parametrize("policy, sid, changes, found", [
        ("WorkerPolicy", "Leases", {"Resource": {"Fn::Sub": "arn:${AWS::Partition}:dynamodb:"
                                                "${AWS::Region}:${AWS::AccountId}:table/*"}},
         ("Leases", "dynamodb:PutItem", "table/foreign")),
        ("WorkerPolicy", "Bucket", {"Resource": "*"},
         ("Bucket", "s3:GetLifecycleConfiguration", "arn:aws:s3:::foreign")),
        ("WorkerPolicy", "JobQueue", {"Resource": "*"},
         ("JobQueue", "sqs:ReceiveMessage", ":foreign")),
        ("WorkerPolicy", "TenantObjects",
         {"Resource": {"Fn::Sub": "${Bucket.Arn}/*"}},
         ("TenantObjects", "s3:PutObject", "/elsewhere/x")),
        ("OperatorPolicy", "ExportJobs", {"Resource": {"Fn::Sub": "${JobsTable.Arn}*"}},
         ("ExportJobs", "dynamodb:Scan", "/index/by-tenant")),
    ])
    def test_a_widened_resource_fails(self, scenario, iam_stack, policy, sid, changes, found):
        """A table widened to table/*, the bucket or a queue to *, a prefix to the whole
        bucket, a table to its indexes: each is a grant no call needed."""
        used = [d for d in iam_stack.decisions(getattr(scenario, HOLDERS[policy]).arn)
                if d["allowed"]]
        wide = too_wide(mutated(scenario.deployed, policy, sid, **changes), policy, used)
        assert any(w[0] == found[0] and w[1] == found[1] and w[2].endswith(found[2])
                   for w in wide), wide

    @pytest.mark.parametrize("policy, sid, action", [
        ("WorkerPolicy", "Tenants", "dynamodb:PutItem"),
        ("WorkerPolicy", "Jobs", "dynamodb:Scan"),
        ("WorkerPolicy", "Bucket", "s3:ListBucket"),
        ("OperatorPolicy", "CheckBucket", "s3:PutBucketPolicy"),
    ])
    def test_an_action_no_call_uses_fails(self, scenario, iam_stack, policy, sid, action):
        """Giving back the worker tenant writes, a jobs Scan or ListBucket, or the operator a
        write it never makes, is an unused grant."""
        st = next(st for st in scenario.deployed.statements(policy) if st["Sid"] == sid)
        changed = mutated(scenario.deployed, policy, sid,
                          Action=statement_list(st["Action"]) + [action])
        used = [d for d in iam_stack.decisions(getattr(scenario, HOLDERS[policy]).arn)
                if d["allowed"]]
        assert [u for u in unused_grants(changed, policy, used) if u[0] == action]

    def test_the_calls_each_process_counted_are_granted(self, scenario):
        """The operations boto3 counted, in the commands and in the worker's parent, are all
        granted: the worker's by WorkerPolicy, the operator's by both policies.

        A DynamoDB call is counted per table too (``dynamodb.Query@<table>``):
        that one must be granted on that table (or, for a Query, its indexes).
        """
        stopped = [r for r in scenario.worker_log if r.get("action") == "stopped"]
        worker = set(scenario.in_process_calls) | set(stopped[-1]["aws_calls"])
        worker_grants = scenario.deployed.statements("WorkerPolicy")
        operator_grants = worker_grants + scenario.deployed.statements("OperatorPolicy")

        def allowed(counted_op: str, statements: list[dict]) -> bool:
            operation, _, table = counted_op.partition("@")
            if operation == "dynamodb.TransactWriteItems":
                return True  # judged item by item, below and by the stack
            if not table:
                return all(granted(statements, a) for a in iam_actions(operation))
            arns = {r for st in statements for r in statement_list(st["Resource"])
                    if r.endswith(f":table/{table}") or f":table/{table}/index/" in r}
            on = arns | {a.split("/index/")[0] for a in arns} | {
                f"{a.split('/index/')[0]}/index/x" for a in arns}
            return bool(arns) and all(any(granted(statements, a, r) for r in on)
                                      for a in iam_actions(operation))

        assert sorted(op for op in worker if not allowed(op, worker_grants)) == []
        assert sorted(op for op in scenario.operator_calls
                      if not allowed(op, operator_grants)) == []
        assert any("@" in op for op in worker), "no per-table count was checked"
        assert any(granted(worker_grants, a)
                   for a in OPERATION_ACTIONS["dynamodb.TransactWriteItems"])
        assert {"sqs.ReceiveMessage", "dynamodb.TransactWriteItems"} <= worker
        assert {f"dynamodb.PutItem@{scenario.settings.tenants_table}",
                f"dynamodb.Scan@{scenario.settings.jobs_table}"} <= set(scenario.operator_calls)

    def test_the_stack_judges_each_table_and_prefix_on_its_own(self, scenario, iam_stack):
        """Under WorkerPolicy, what it grants works and its near misses are denied, among
        them every write of tenant config, a Scan of the jobs table and listing the bucket."""
        s = scenario.settings
        never = {"ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(pk)"}
        with aws_as(iam_stack.url, scenario.prober):
            aws = boto3.session.Session()
            dynamo, s3, sqs = aws.client("dynamodb"), aws.client("s3"), aws.client("sqs")
            key = {"pk": {"S": "probe"}}
            tries = {
                "GetItem jobs": lambda: dynamo.get_item(TableName=s.jobs_table,
                                                        Key={"job_id": {"S": "probe"}}),
                "GetItem leases": lambda: dynamo.get_item(TableName=s.leases_table, Key=key),
                "Put leases in a transaction": lambda: dynamo.transact_write_items(
                    TransactItems=[{"Put": {"TableName": s.leases_table, "Item": key,
                                            **never}}]),
                "ConditionCheck leases": lambda: dynamo.transact_write_items(
                    TransactItems=[{"ConditionCheck": {"TableName": s.leases_table, "Key": key,
                                                       **never}}]),
                "DeleteTable jobs": lambda: dynamo.delete_table(TableName=s.jobs_table),
                "PutItem tenants": lambda: dynamo.put_item(
                    TableName=s.tenants_table, Item={"tenant_id": {"S": "tenant-a"},
                                                     "webhook_secret": {"S": "stolen"}}),
                "Scan jobs": lambda: dynamo.scan(TableName=s.jobs_table, Limit=1),
                "ListObjects": lambda: s3.list_objects_v2(Bucket=s.bucket, Prefix="tenants/"),
                "GetObject outside the prefixes": lambda: s3.get_object(
                    Bucket=s.bucket, Key="elsewhere/x.pdf"),
                "PurgeQueue": lambda: sqs.purge_queue(
                    QueueUrl=sqs.get_queue_url(QueueName=s.queue_name)["QueueUrl"]),
            }
            outcomes = {name: client_error(call) for name, call in tries.items()}
        assert outcomes == {
            "GetItem jobs": "ok", "GetItem leases": "AccessDenied",
            "Put leases in a transaction": "TransactionCanceledException",
            "ConditionCheck leases": "AccessDenied", "DeleteTable jobs": "AccessDenied",
            "PutItem tenants": "AccessDenied", "Scan jobs": "AccessDenied",
            "ListObjects": "AccessDenied",
            "GetObject outside the prefixes": "AccessDenied", "PurgeQueue": "AccessDenied"}


class TestTenantPolicy:
    def test_a_tenant_cannot_touch_another_tenants_prefix(self, scenario):
        """Tenant-a may neither write nor read under tenants/tenant-b/, nor submit as tenant-b."""
        assert scenario.tenant_tries == {
            "put into tenant-b": "AccessDenied", "get from tenant-b": "AccessDenied",
            "submit as tenant-b": "AccessDenied", "get own plate": "ok"}

    def test_a_tenant_cannot_start_a_job_as_another(self, scenario):
        """Tenant-a's message naming tenant-b, which SQS accepts, is refused by its SenderId:
        dead-lettered and recorded under neither tenant."""
        refused = [r for r in scenario.worker_log if r.get("action") == "sender_refused"]
        assert [(r["claimed_tenant"], r["sender_id"]) for r in refused] == [
            ("tenant-b", scenario.tenants["tenant-a"].user_id)]
        listed = [r["job_id"] for key in ("jobs --tenant", "jobs --tenant tenant-b")
                  for r in json.loads(scenario.commands[key].output)]
        assert scenario.jobs["forged"] not in listed and scenario.jobs["b-1"] in listed

    def test_submit_needs_nothing_more(self, scenario, iam_stack):
        """Every call a tenant's submit made was allowed; the only denials are the probes above."""
        for tenant, who in scenario.tenants.items():
            denied = [d for d in iam_stack.decisions(who.arn) if not d["allowed"]]
            assert all("/tenants/tenant-b/" in d["resource"] for d in denied), denied
            if tenant == "tenant-b":
                assert denied == []
            else:
                assert {d["action"] for d in denied} == {"s3:GetObject", "s3:PutObject"}

    def test_a_tenant_principal_fails_the_worker_doctor(self, scenario, iam_stack):
        """A host running with a tenant's credentials is refused by doctor, exit 3."""
        with aws_as(iam_stack.url, scenario.tenants["tenant-a"]):
            outcome = CliRunner().invoke(main, ["doctor", "--json"], env=_settings_env(scenario),
                                         catch_exceptions=False)
        assert outcome.exit_code == 3
        failed = {c["name"] for c in json.loads(outcome.stdout)["checks"]
                  if c["status"] == "fail"}
        assert f"queue {scenario.settings.dlq_name}" in failed
        assert f"table {scenario.settings.jobs_table}" in failed


def _settings_env(scenario: Scenario) -> dict[str, str]:
    env = dict(line.split("=", 1) for line in scenario.deployed.output("EnvFile").splitlines())
    return {**env, **TIMINGS}
