"""deploy/imposer.yaml: linted, and one source of truth with the code.

The tables, queues and bucket the template declares are compared with the
stores' table specs and with what `imposer init` creates on the local stack;
its parameter defaults and EnvFile output with Settings; the metrics its
dashboard, alarms and metric filters read with the ``metrics.emit`` calls in
the code. A change on one side alone fails here.
"""

from __future__ import annotations

import ast
import configparser
import copy
import json
import re
import string
from pathlib import Path

import attrs
import boto3
import pytest
from cfnlint.api import lint_file
from click.testing import CliRunner
from parliament import analyze_policy_string

import imposer
from imposer.aws.dynamodb import Dynamo
from imposer.aws.s3 import Storage
from imposer.aws.sqs import JobQueue
from imposer.cli import main
from imposer.aws.tables import Index, TableSpec
from imposer.settings import Settings
from imposer.state.provision import described, provision, queue_shape, table_specs
from tests.deploy.template import TEMPLATE, Stack, load

DEPLOY = TEMPLATE.parent

#: Metrics the template's own metric filters make from the log lines (no dimensions).
FILTER_METRICS = {"fleet_slot_utilisation", "jobs_started", "slow_starts"}
#: What `imposer demo` shows; the dashboard must show each.
DEMO_METRICS = {"slot_utilisation", "queue_wait", "cap_defer", "stranded_seconds",
                "shortage_seconds"}


# -- shapes to compare: one per source ----------------------------------------------------------
def _projection(projection: dict) -> dict:
    out = {"ProjectionType": projection["ProjectionType"]}
    if projection.get("NonKeyAttributes"):
        out["NonKeyAttributes"] = sorted(projection["NonKeyAttributes"])
    return out


def _shape(keys, definitions, indexes, ttl) -> dict:
    return {"KeySchema": list(keys),
            "AttributeDefinitions": sorted(definitions, key=lambda d: d["AttributeName"]),
            "Indexes": {i["IndexName"]: {"KeySchema": i["KeySchema"],
                                         "Projection": _projection(i["Projection"])}
                        for i in indexes},
            "TTL": ttl}


def from_spec(spec: TableSpec) -> dict:
    return _shape(spec.key_schema(),
                  [{"AttributeName": n, "AttributeType": t}
                   for n, t in spec.attribute_types().items()],
                  [i.to_api() for i in spec.indexes], spec.ttl_attribute)


def from_template(props: dict) -> dict:
    ttl = props.get("TimeToLiveSpecification") or {}
    return _shape(props["KeySchema"], props["AttributeDefinitions"],
                  props.get("GlobalSecondaryIndexes", []),
                  ttl.get("AttributeName") if ttl.get("Enabled") else None)


def from_aws(table: dict) -> dict:
    ttl = table["TimeToLive"]
    return _shape(table["KeySchema"], table["AttributeDefinitions"],
                  table.get("GlobalSecondaryIndexes", []),
                  ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") == "ENABLED" else None)


#: Properties of each kind of resource the init comparison reads; any other fails a test.
COMPARED = {
    "AWS::SQS::Queue": {"QueueName", "MessageRetentionPeriod", "VisibilityTimeout",
                        "SqsManagedSseEnabled", "RedrivePolicy"},
    "AWS::DynamoDB::Table": {"TableName", "BillingMode", "KeySchema", "AttributeDefinitions",
                             "GlobalSecondaryIndexes", "TimeToLiveSpecification",
                             "PointInTimeRecoverySpecification"},
    "AWS::S3::Bucket": {"BucketName", "BucketEncryption", "PublicAccessBlockConfiguration",
                        "OwnershipControls", "VersioningConfiguration",
                        "LifecycleConfiguration"},
}


def queue_from_template(props: dict) -> dict:
    out = {"MessageRetentionPeriod": str(props["MessageRetentionPeriod"]),
           "VisibilityTimeout": str(props["VisibilityTimeout"]),
           "SqsManagedSseEnabled": str(props.get("SqsManagedSseEnabled", False)).lower()}
    if "RedrivePolicy" in props:
        out["RedrivePolicy"] = {
            "deadLetterTargetArn": props["RedrivePolicy"]["deadLetterTargetArn"],
            "maxReceiveCount": int(props["RedrivePolicy"]["maxReceiveCount"])}
    return out


def table_from_template(props: dict) -> dict:
    ttl = props.get("TimeToLiveSpecification") or {}
    index = {i["IndexName"]: _projection_sorted(i) for i in props.get("GlobalSecondaryIndexes", [])}
    return {"KeySchema": props["KeySchema"],
            "AttributeDefinitions": sorted(props["AttributeDefinitions"],
                                           key=lambda d: d["AttributeName"]),
            "Indexes": index,
            "TTL": ttl.get("AttributeName") if ttl.get("Enabled") else None,
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
            "PointInTimeRecovery": bool((props.get("PointInTimeRecoverySpecification") or {})
                                        .get("PointInTimeRecoveryEnabled"))}


def _projection_sorted(index: dict) -> dict:
    projection = dict(index["Projection"])
    if "NonKeyAttributes" in projection:
        projection["NonKeyAttributes"] = sorted(projection["NonKeyAttributes"])
    return {"KeySchema": index["KeySchema"], "Projection": projection}


def lifecycle_rule(rule: dict) -> dict:
    """A CloudFormation lifecycle rule as S3's API returns it."""
    out = {"ID": rule["Id"], "Status": rule["Status"], "Filter": {"Prefix": rule.get("Prefix", "")}}
    expiration = {}
    if "ExpirationInDays" in rule:
        expiration["Days"] = int(rule["ExpirationInDays"])
    if rule.get("ExpiredObjectDeleteMarker"):
        expiration["ExpiredObjectDeleteMarker"] = True
    if expiration:
        out["Expiration"] = expiration
    if "NoncurrentVersionExpiration" in rule:
        out["NoncurrentVersionExpiration"] = {
            "NoncurrentDays": int(rule["NoncurrentVersionExpiration"]["NoncurrentDays"])}
    if "AbortIncompleteMultipartUpload" in rule:
        out["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": int(
            rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])}
    unknown = set(rule) - {"Id", "Status", "Prefix", "ExpirationInDays",
                           "ExpiredObjectDeleteMarker", "NoncurrentVersionExpiration",
                           "AbortIncompleteMultipartUpload"}
    assert not unknown, f"lifecycle rule {rule['Id']}: compare {unknown} too"
    return out


def bucket_from_template(stack: Stack) -> dict:
    props = stack.properties("Bucket")
    policy, = stack.of_type("AWS::S3::BucketPolicy").values()
    encryption, = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    ownership, = props["OwnershipControls"]["Rules"]
    return {"Encryption": encryption["ServerSideEncryptionByDefault"]["SSEAlgorithm"],
            "PublicAccessBlock": props["PublicAccessBlockConfiguration"],
            "Ownership": ownership["ObjectOwnership"],
            "Versioning": props["VersioningConfiguration"]["Status"],
            "Lifecycle": sorted((lifecycle_rule(r) for r in
                                 props["LifecycleConfiguration"]["Rules"]),
                                key=lambda r: r["ID"]),
            "Policy": policy["PolicyDocument"]["Statement"]}


def declared_tables(stack: Stack) -> dict[str, dict]:
    return {p["TableName"]: p for p in stack.of_type("AWS::DynamoDB::Table").values()}


def table_differences(stack: Stack, specs: list[TableSpec]) -> list[str]:
    """Say every way the template's tables differ from the stores' specs."""
    declared = declared_tables(stack)
    out = [f"{name}: declared in the template, no store uses it"
           for name in set(declared) - {s.name for s in specs}]
    for spec in specs:
        if spec.name not in declared:
            out.append(f"{spec.name}: not in the template")
            continue
        want, have = from_spec(spec), from_template(declared[spec.name])
        out += [f"{spec.name}: {key} is {have[key]} in the template, {want[key]} in the code"
                for key in want if want[key] != have[key]]
        if declared[spec.name].get("BillingMode") != "PAY_PER_REQUEST":
            out.append(f"{spec.name}: not PAY_PER_REQUEST as init makes it")
    return out


def stack_for(names: dict[str, str]) -> Stack:
    return Stack({"QueueName": names["queue_name"], "DlqName": names["dlq_name"],
                  "TablePrefix": names["table_prefix"], "BucketName": names["bucket"]})


def settings_of(stack: Stack) -> Settings:
    """The settings a host gets from the stack's EnvFile output."""
    return Settings.load(dict(line.split("=", 1)
                              for line in stack.output("EnvFile").splitlines()))


# -- metrics the code emits --------------------------------------------------------------------
def emitted_metrics() -> set[tuple[str, frozenset]]:
    """(name, dimension names) of every ``metrics.emit("name", value, **dims)`` in imposer."""
    found = set()
    for path in Path(imposer.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "emit" and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                found.add((node.args[0].value,
                           frozenset(k.arg for k in node.keywords if k.arg)))
    return found


def read_metrics(stack: Stack) -> set[tuple[str, frozenset]]:
    """(name, dimension names) of every metric of imposer's namespace the template reads."""
    ns = stack.parameters["MetricsNamespace"]
    body = json.loads(stack.properties("Dashboard")["DashboardBody"])
    rows = [row for w in body["widgets"] for row in w["properties"].get("metrics", [])]
    alarms = list(stack.of_type("AWS::CloudWatch::Alarm").values())
    expressions = [r[-1]["expression"] for r in rows if "expression" in r[-1]] + [
        m["Expression"] for a in alarms for m in a.get("Metrics", []) if "Expression" in m]
    found = set()
    for text in expressions:
        for dims, name in re.findall(r"SEARCH\('\{" + ns + r",?([^}]*)\} MetricName=\"(\w+)\"",
                                     text):
            found.add((name, frozenset(d for d in dims.split(",") if d)))
        for name, dims in re.findall(
                r"SELECT \w+\((\w+)\) FROM SCHEMA\(\"" + ns + r"\",? ?([^)]*)\)", text):
            found.add((name, frozenset(d.strip() for d in dims.split(",") if d.strip())))
    found |= {(r[1], frozenset(r[2:-1:2])) for r in rows if r[0] == ns}
    for alarm in alarms:
        stats = [alarm] + [m["MetricStat"]["Metric"] for m in alarm.get("Metrics", [])
                           if "MetricStat" in m]
        found |= {(s["MetricName"], frozenset(d["Name"] for d in s.get("Dimensions", [])))
                  for s in stats if s.get("Namespace") == ns}
    return found


class TestLint:
    def test_cfn_lint_finds_nothing(self):
        """cfn-lint (schemas, IAM action names, references) reports no error or warning."""
        assert [str(m) for m in lint_file(TEMPLATE)] == []

    @pytest.mark.filterwarnings("ignore::DeprecationWarning")  # cfripper on pydantic 2
    def test_cfripper_finds_no_security_issue(self):
        """cfripper's security rules pass, with and without resolving intrinsic functions."""
        from cfripper.cli import cli

        for resolve in ("--no-resolve", "--resolve"):
            outcome = CliRunner().invoke(cli, [str(TEMPLATE), "--format", "json", resolve])
            assert json.loads(outcome.output.splitlines()[-1]) == {
                "exceptions": [], "failures": []}, outcome.output
            assert outcome.exit_code == 0

    @pytest.mark.parametrize("policy", ["WorkerPolicy", "OperatorPolicy",
                                        "TenantPolicyExample", "LogShippingPolicy"])
    def test_parliament_finds_nothing_in_the_policies(self, policy):
        """Each action matches its resource type (parliament); policy variables filled in first."""
        document = json.dumps({"Version": "2012-10-17",
                               "Statement": Stack().statements(policy)})
        document = document.replace("${aws:PrincipalTag/imposer-tenant}", "acme")
        assert [(f.issue, f.detail) for f in analyze_policy_string(document).findings] == []


class TestOneSourceOfTruth:
    def test_tables_are_the_stores_specs(self):
        """Every table's keys, indexes, projections and TTL are the ones its store declares."""
        stack = Stack()
        assert table_differences(stack, table_specs(settings_of(stack))) == []

    def test_a_table_change_in_the_template_alone_fails(self):
        """Dropping an index from the template, and nothing else, is a difference."""
        template = copy.deepcopy(load())
        jobs = template["Resources"]["JobsTable"]["Properties"]
        jobs["GlobalSecondaryIndexes"] = jobs["GlobalSecondaryIndexes"][:-1]
        stack = Stack(template=template)
        assert table_differences(stack, table_specs(settings_of(stack))) == [
            "imposer-jobs: Indexes is " + repr(from_template(jobs)["Indexes"])
            + " in the template, " + repr(from_spec(table_specs(settings_of(stack))[1])["Indexes"])
            + " in the code"]

    def test_a_table_change_in_the_code_alone_fails(self):
        """A store declaring one more index than the template does is a difference."""
        stack = Stack()
        specs = table_specs(settings_of(stack))
        specs[4] = attrs.evolve(specs[4], indexes=(Index(name="by-host", hash_key="host"),))
        assert any(d.startswith("imposer-rollups: Indexes") for d in
                   table_differences(stack, specs))

    def test_what_init_creates_is_what_the_template_declares(self, aws_endpoint, names):
        """Every attribute of init's queues, tables and bucket, read back from the local
        stack, is the one the template declares for the same names."""
        stack = stack_for(names)
        settings = settings_of(stack)
        provision(settings)
        queue, dynamo = JobQueue(settings.region, settings.queue_name, settings.dlq_name), \
            Dynamo(settings.region)
        for props in stack.of_type("AWS::SQS::Queue").values():
            declared = queue_from_template(props)
            created = queue_shape(queue.attributes(props["QueueName"]))
            assert {k: created.get(k) for k in declared} == declared, props["QueueName"]
        for props in stack.of_type("AWS::DynamoDB::Table").values():
            assert described(dynamo, props["TableName"]) == table_from_template(props), \
                props["TableName"]
        assert Storage(settings.region).bucket_settings(settings.bucket) == \
            bucket_from_template(stack)

    def test_every_property_the_template_sets_is_compared(self):
        """A property added to a queue, table or the bucket in the template alone fails here."""
        stack = Stack()
        for kind, known in COMPARED.items():
            for logical, props in stack.of_type(kind).items():
                assert set(props) - known == set(), logical
        policy, = stack.of_type("AWS::S3::BucketPolicy").values()
        assert set(policy) == {"Bucket", "PolicyDocument"}

    def test_init_check_changes_nothing_and_names_each_difference(self, aws_endpoint, names):
        """On resources that match, --check says so; after a hand change it exits 1 naming it,
        and neither it nor a plain init undoes the change."""
        stack = stack_for(names)
        settings = settings_of(stack)
        provision(settings)
        env = {"IMPOSER_QUEUE": settings.queue_name, "IMPOSER_DLQ": settings.dlq_name,
               "IMPOSER_BUCKET": settings.bucket, "IMPOSER_TABLE_PREFIX": settings.table_prefix}
        runner = CliRunner()
        clean = runner.invoke(main, ["init", "--check"], env=env)
        assert clean.exit_code == 0 and "nothing was changed" in clean.output, clean.output
        again = runner.invoke(main, ["init"], env=env)
        assert "all there already; nothing was changed" in again.output, again.output
        sqs, s3 = boto3.session.Session().client("sqs"), boto3.session.Session().client("s3")
        url = sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "900"})
        s3.put_bucket_versioning(Bucket=settings.bucket,
                                 VersioningConfiguration={"Status": "Suspended"})
        for args in (["init", "--check"], ["init"]):
            out = runner.invoke(main, args, env=env)
            lines = {line.split()[1]: line for line in out.output.splitlines()
                     if line.split()[:1] in (["queue"], ["table"], ["bucket"])}
            assert 'VisibilityTimeout is "900", init makes "600"' in lines[settings.queue_name]
            assert 'Versioning is "Suspended", init makes "Enabled"' in lines[settings.bucket]
            assert all(line.endswith(("matches", "exists")) for name, line in lines.items()
                       if name not in (settings.queue_name, settings.bucket)), out.output
        assert out.exit_code == 0 and clean.exit_code == 0
        assert runner.invoke(main, ["init", "--check"], env=env).exit_code == 1
        assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])[
            "Attributes"]["VisibilityTimeout"] == "900"

    def test_parameter_defaults_are_the_settings_defaults(self):
        """The EnvFile of a default stack gives every setting its default (the bucket aside)."""
        env = dict(line.split("=", 1) for line in Stack().output("EnvFile").splitlines())
        defaults = Settings.load({})
        by_env = {f.metadata["env"]: f.name for f in attrs.fields(Settings)}
        differ = {key: (value, getattr(defaults, by_env[key])) for key, value in env.items()
                  if key != "IMPOSER_BUCKET" and
                  str(getattr(defaults, by_env[key])) not in (value, f"{value}.0")}
        assert differ == {}

    def test_the_env_file_names_only_settings_and_the_stacks_resources(self, names):
        """Every EnvFile line is a setting, and it names the stack's own queue, tables and bucket."""
        stack = stack_for(names)
        env = dict(line.split("=", 1) for line in stack.output("EnvFile").splitlines())
        assert set(env) <= {f.metadata["env"] for f in attrs.fields(Settings)}
        settings = settings_of(stack)
        assert (settings.queue_name, settings.dlq_name, settings.bucket,
                settings.table_prefix) == (names["queue_name"], names["dlq_name"],
                                           names["bucket"], names["table_prefix"])

    def test_visibility_is_the_lease_ttl_and_redrive_the_safety_net(self):
        """The job queue's visibility follows LeaseTtlSeconds and its redrive MaxReceiveCount."""
        stack = Stack({"LeaseTtlSeconds": 900, "MaxReceiveCount": 700})
        queue = stack.properties("JobQueue")
        assert (queue["VisibilityTimeout"], queue["RedrivePolicy"]["maxReceiveCount"]) == (
            "900", "700")
        env = dict(line.split("=", 1) for line in stack.output("EnvFile").splitlines())
        assert (env["IMPOSER_LEASE_TTL_SECONDS"], env["IMPOSER_MAX_RECEIVE_COUNT"]) == (
            "900", "700")


class TestMetrics:
    def test_every_metric_read_is_one_the_code_emits(self):
        """Dashboard, alarms and Insights queries name metrics and dimensions the code emits."""
        emitted = emitted_metrics()
        unknown = {(name, dims) for name, dims in read_metrics(Stack())
                   if (name, dims) not in emitted
                   and not (name in FILTER_METRICS and not dims)}
        assert unknown == set()

    def test_metric_filters_read_log_fields_the_code_writes(self):
        """Each filter matches a metric's log line and takes its value from that metric's field."""
        names = {name for name, _ in emitted_metrics()}
        made = set()
        for flt in Stack().of_type("AWS::Logs::MetricFilter").values():
            assert set(re.findall(r'\$\.metric = "(\w+)"', flt["FilterPattern"])) <= names
            for transform in flt["MetricTransformations"]:
                value = transform["MetricValue"]
                assert value == "1" or value.removeprefix("$.") in names
                made.add(transform["MetricName"])
        assert made == FILTER_METRICS

    def test_the_dashboard_shows_what_the_demo_shows(self):
        """Utilisation, queue waits, cap deferrals, stranded and shortage are all on it."""
        assert DEMO_METRICS <= {name for name, _ in read_metrics(Stack())}

    def test_reading_finds_what_the_template_reads(self):
        """The reader sees the SEARCH, Insights and plain metric forms the template uses."""
        read = read_metrics(Stack())
        assert ("cap_defer", frozenset({"tenant_id"})) in read
        assert ("lease_recovered", frozenset({"host", "tenant_id"})) in read
        assert ("fleet_slot_utilisation", frozenset()) in read


def agent_config(stack: Stack) -> dict:
    """deploy/cloudwatch-agent.json rendered for *stack* as the envsubst line of
    docs/deploy-on-aws.rst does."""
    text = (DEPLOY / "cloudwatch-agent.json").read_text()
    return json.loads(string.Template(text).substitute(
        IMPOSER_LOG_GROUP=stack.output("LogGroupName")))


class TestLogShipping:
    def test_the_agent_ships_the_file_the_log_unit_writes_to_the_stacks_log_group(self):
        """Journal -> imposer-logs.service -> file -> CloudWatch agent -> the metric filters' group."""
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.read(DEPLOY / "imposer-logs.service")
        written = unit["Service"]["StandardOutput"].removeprefix("append:")
        stack = Stack()
        collected, = agent_config(stack)["logs"]["logs_collected"]["files"]["collect_list"]
        group = stack.properties("WorkerLogGroup")["LogGroupName"]
        assert (collected["file_path"], collected["log_group_name"]) == (written, group)
        assert (DEPLOY / "imposer-logs.logrotate").read_text().count(f"{written} {{") == 1
        assert {f["LogGroupName"] for f in stack.of_type("AWS::Logs::MetricFilter").values()} \
            == {group}
        assert "--unit=imposer.service" in unit["Service"]["ExecStart"]

    def test_a_renamed_log_group_is_the_one_the_agent_ships_to(self):
        """With LogGroupName changed, the rendered agent config names the new group; the file
        itself names none."""
        stack = Stack({"LogGroupName": "/acme/imposer-prod"})
        collected, = agent_config(stack)["logs"]["logs_collected"]["files"]["collect_list"]
        assert collected["log_group_name"] == "/acme/imposer-prod" == \
            stack.properties("WorkerLogGroup")["LogGroupName"]
        raw, = json.loads((DEPLOY / "cloudwatch-agent.json").read_text())["logs"][
            "logs_collected"]["files"]["collect_list"]
        assert raw["log_group_name"] == "${IMPOSER_LOG_GROUP}"
