"""The metrics CloudWatch would extract from a real run's log lines, and the template reading them.

One run on the local stack writes the lines: a worker host crashes holding a
lease and the cron sweep (`imposer sweep --once`) reclaims it; a worker runs
a tenant at its cap of 1, a webhook that is delivered and one that fails, an
invalid message; `imposer capacity --emit` logs the licence verdict. Every
line that claims to be a metric must be an Embedded Metric Format record
CloudWatch accepts (tests/deploy/emf.py: the specification, and the record
aws-embedded-metrics writes for the same data point). Every metric the
template's alarms and dashboard read must be one of the run's data points,
and every metric filter must match one of its lines; a change on either
side alone fails here.
"""

from __future__ import annotations

import configparser
import copy
import re
import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import attrs
import pytest

from imposer.client import submit
from imposer.models.urgency import format_due
from imposer.client.aws import Aws
from imposer.client.receiver import WebhookReceiver
from imposer.metrics import CATALOGUE
from imposer.models import TenantConfig
from imposer.settings import Settings
from imposer.state.provision import provision
from imposer.worker.wiring import connect
from tests.deploy import emf
from tests.deploy.template import TEMPLATE, Stack, load
from tests.fixtures.aws import env_for
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import Worker, layout, wait_for

pytestmark = pytest.mark.slow

ROOT = TEMPLATE.parents[1]
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_" + "c2VjcmV0IHRoZSByZWNlaXZlciBkb2VzIG5vdCBrbm93"
#: AWS/SQS metrics the template may read (what SQS publishes per queue).
SQS_METRICS = {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage",
               "NumberOfMessagesSent", "ApproximateNumberOfMessagesNotVisible",
               "ApproximateNumberOfMessagesDelayed", "NumberOfMessagesReceived",
               "NumberOfMessagesDeleted", "NumberOfEmptyReceives", "SentMessageSize"}


@attrs.frozen
class Line:
    """One JSON log line of the run and the process that wrote it."""

    source: str
    text: str

    @property
    def record(self) -> dict:
        return json.loads(self.text)


@attrs.define
class Run:
    settings: Settings
    lines: list[Line]
    webhooks: list[dict]

    def metric_lines(self) -> list[Line]:
        return [ln for ln in self.lines if emf.is_metric_line(ln.record)]

    def points(self, source: str | None = None) -> list[emf.DataPoint]:
        return [p for ln in self.metric_lines() if source in (None, ln.source)
                if not emf.problems(ln.text) for p in emf.data_points(ln.record)]


def json_lines(source: str, path: Path) -> list[Line]:
    out = []
    for text in path.read_text().splitlines():
        try:
            if isinstance(json.loads(text), dict):
                out.append(Line(source, text))
        except ValueError:
            pass  # a plain line (the sweep's summary): not JSON, not a metric
    return out


def imposer(settings: Settings, log: Path, *args: str, **env: str) -> int:
    """Run one `imposer` command to its end with *settings*; its output goes to *log*."""
    with open(log, "w") as out:
        return subprocess.run([sys.executable, "-m", "imposer", *args], cwd=ROOT,
                              env={**env_for(settings), **env}, stdout=out,
                              stderr=subprocess.STDOUT, timeout=120).returncode


@pytest.fixture(scope="module")
def run(aws_endpoint, tmp_path_factory) -> Run:
    """Crash a host, sweep, then run capped, webhook and invalid jobs; collect every line."""
    tmp = tmp_path_factory.mktemp("emf")
    tag = uuid.uuid4().hex[:10]
    settings = Settings.load(
        {}, heartbeat_seconds=0.5, lease_ttl_seconds=3.0, defer_seconds=1.0, park_seconds=3.0,
        sweep_seconds=0.5, poll_seconds=1, retry_seconds=0.0, slots=2,
        queue_name=f"q-{tag}", dlq_name=f"q-{tag}-dlq", bucket=f"b-{tag}",
        table_prefix=f"t-{tag}")
    provision(settings)
    backends = connect(settings)
    backends.tenants.put(TenantConfig(tenant_id="capped", cap=1, webhook_secret=SECRET,
                                      webhook_hosts=("127.0.0.1",)))
    backends.tenants.put(TenantConfig(tenant_id="stranger", webhook_secret=OTHER_SECRET,
                                      webhook_hosts=("127.0.0.1",)))
    extra = {"IMPOSER_WEBHOOK_ALLOW_LOOPBACK": "1", "IMPOSER_WEBHOOK_POLL_SECONDS": "0.2",
             "IMPOSER_ROLLUP_SECONDS": "0.5", "IMPOSER_SLOTS": "2",
             "IMPOSER_ENGINE": "pdftoolbox"}
    pdf = numbered_pdf(tmp / "art.pdf", 2)
    lines: list[Line] = []
    receiver = WebhookReceiver({"capped": SECRET}).start()
    try:
        # 1. A host dies holding a lease; the cron sweep reclaims it once it has expired.
        crash_gate, cap_gate = tmp / "crash-gate", tmp / "cap-gate"
        submit("crashed", pdf, layout(fake_until=crash_gate), bucket=settings.bucket,
               queue=settings.queue_name)
        doomed = Worker(settings, tmp, "doomed-host", env=extra)
        try:
            wait_for(lambda: doomed.actions("job_started"), 60, "the doomed host's job")
            doomed.crash()
        finally:
            doomed.close()
        lines += json_lines("doomed", doomed.log_path)
        wait_for(lambda: all(lease.expires_at < backends.clock.time()
                             for lease in backends.leases.leases()), 30, "the lease to expire")
        assert imposer(settings, tmp / "sweep.log", "sweep", "--once",
                       IMPOSER_HOST_ID="cron-sweeper") == 0
        assert "reclaimed 1 expired lease" in (tmp / "sweep.log").read_text()
        lines += json_lines("sweep", tmp / "sweep.log")
        crash_gate.touch()

        # 2. A tenant at its cap of 1, webhooks delivered and failed (401), an invalid message.
        for _ in range(3):
            submit("capped", pdf, layout(fake_until=cap_gate), bucket=settings.bucket,
                   queue=settings.queue_name, webhook=receiver.url("capped"))
        submit("stranger", pdf, layout(), bucket=settings.bucket, queue=settings.queue_name,
               webhook=receiver.url("stranger"), due=format_due(time.time() - 60))  # (late)
        Aws().send(settings.queue_name, json.dumps({"version": 1, "job_id": "not-a-job",
                                                    "tenant_id": "stranger"}),
                   group_id="stranger")
        # (fair share on, so its share_gap lines are among the run's)
        worker = Worker(settings, tmp, "emf-host", env={
            **extra, "IMPOSER_SHARE_HALF_LIFE": "600", "IMPOSER_REDRIVE_SECONDS": "0.5"})
        try:
            wait_for(lambda: worker.actions("cap_defer"), 60, "a cap deferral")
            wait_for(lambda: any(r["metric"] == "share_gap" for r in worker.actions("metric")),
                     60, "a share gap")
            wait_for(lambda: any(r["metric"] == "backlog" and r["backlog"] >= 1
                                 for r in worker.actions("metric")), 60, "a parked backlog")
            cap_gate.touch()

            def settled() -> bool:
                done = [r for r in worker.actions("metric") if r["metric"] == "jobs"]
                failed = [r for r in worker.actions("metric")
                          if r["metric"] == "webhooks" and r["outcome"] == "failed"]
                return len(done) >= 6 and len(receiver.events) >= 3 and bool(failed)

            wait_for(settled, 90, "every job settled and every webhook sent")
            worker.signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        finally:
            worker.close()
        lines += json_lines("worker", worker.log_path)

        # 3. The licence verdict, as the hourly timer logs it.
        assert imposer(settings, tmp / "capacity.log", "capacity", "--emit") == 0
        lines += json_lines("capacity", tmp / "capacity.log")
    finally:
        receiver.stop()
    return Run(settings=settings, lines=lines, webhooks=list(receiver.events))


# -- what the template reads, against what the run emitted ------------------------------------
def read_problems(stack: Stack, points: list[emf.DataPoint]) -> list[str]:
    """Every metric the template reads that no data point of the run (or filter) provides."""
    ns = stack.parameters["MetricsNamespace"]
    queues = {p["QueueName"] for p in stack.of_type("AWS::SQS::Queue").values()}
    filters = {t["MetricName"]: t for f in stack.of_type("AWS::Logs::MetricFilter").values()
               for t in f["MetricTransformations"]}
    out = []
    for read in emf.reads(stack):
        if read.namespace == "AWS/SQS":
            if read.name not in SQS_METRICS or read.dimensions != {"QueueName"} or \
                    dict(read.values).get("QueueName") not in queues:
                out.append(f"{read.where}: {read.name} {dict(read.values)} is not a queue "
                           "metric of this stack")
            continue
        if read.namespace != ns:
            out.append(f"{read.where}: namespace {read.namespace} is not {ns}")
            continue
        if read.name in filters and not read.dimensions:
            made = filters[read.name]
            if read.unit not in (None, made.get("Unit")):
                out.append(f"{read.where}: {read.name} in {read.unit}, its filter makes "
                           f"{made.get('Unit')}")
            continue
        hits = [p for p in points if (p.namespace, p.name, p.dimension_names) ==
                (read.namespace, read.name, read.dimensions)]
        if not hits:
            out.append(f"{read.where}: reads {read.name} by {sorted(read.dimensions)}, which "
                       "the run never emitted")
            continue
        if read.unit is not None and {p.unit for p in hits} != {read.unit}:
            out.append(f"{read.where}: reads {read.name} in {read.unit}, the run emitted "
                       f"{sorted({p.unit for p in hits})}")
        wanted = dict(read.values)
        if wanted and not any(wanted.items() <= dict(p.dimensions).items() for p in hits):
            out.append(f"{read.where}: reads {read.name} where {wanted}, no data point had it")
    return out


def filter_problems(stack: Stack, lines: list[Line]) -> list[str]:
    """Every metric filter that matches none of the run's lines, or takes no number from them."""
    out = []
    for logical, flt in stack.of_type("AWS::Logs::MetricFilter").items():
        hits = [ln.record for ln in lines if emf.matches(flt["FilterPattern"], ln.record)]
        if not hits:
            out.append(f"{logical}: {flt['FilterPattern']} matches no line of the run")
        for transform in flt["MetricTransformations"]:
            value = transform["MetricValue"]
            if value.startswith("$.") and not all(
                    emf._finite(h.get(value[2:])) for h in hits):
                out.append(f"{logical}: a matched line has no number at {value}")
    return out


def rename_in_lines(lines: list[Line], old: str, new: str) -> list[Line]:
    """The lines as the code would write them with metric *old* renamed *new*."""
    out = []
    for ln in lines:
        record = ln.record
        if record.get("metric") == old:
            record["metric"], record[new] = new, record.pop(old)
            for directive in record["_aws"]["CloudWatchMetrics"]:
                for definition in directive["Metrics"]:
                    definition["Name"] = new if definition["Name"] == old else definition["Name"]
        out.append(Line(ln.source, json.dumps(record)))
    return out


def points_of(lines: list[Line]) -> list[emf.DataPoint]:
    return [p for ln in lines if "_aws" in ln.record for p in emf.data_points(ln.record)]


class TestConformance:
    def test_every_metric_line_of_the_run_is_an_emf_record_cloudwatch_accepts(self, run):
        """Each line that claims to be a metric passes the EMF specification and the reference."""
        lines = run.metric_lines()
        # at least 6 jobs, 5 waits, 4 webhook attempts, 3 licence figures, a cap deferral, a
        # recovered lease and a failure; heartbeats add more, as many as the run took seconds
        assert len(lines) >= 21
        assert {ln.text[:200]: emf.problems(ln.text) for ln in lines
                if emf.problems(ln.text)} == {}

    def test_each_data_point_has_its_catalogue_unit_and_dimensions(self, run):
        """Names, units and dimension sets are the catalogue's: a drift in the code shows."""
        seen = {(p.name, p.unit, p.dimension_names) for p in run.points()}
        assert {(name, unit, dims) for name, unit, dims in seen
                if name not in CATALOGUE or (unit, dims) != (
                    CATALOGUE[name].unit, frozenset(CATALOGUE[name].dimensions))} == set()
        assert {p.namespace for p in run.points()} == {run.settings.metrics_namespace}

    def test_a_formatter_that_drops_the_envelope_fails(self, run):
        """A metric line without ``_aws`` (the python-json-logger bug this fixed) is a finding."""
        line = next(ln for ln in run.metric_lines() if ln.record["metric"] == "cap_defer")
        stripped = {k: v for k, v in line.record.items() if k != "_aws"}
        assert emf.problems(json.dumps(stripped)) == ["no _aws metadata object"]
        unnamed = copy.deepcopy(line.record)
        unnamed["_aws"]["CloudWatchMetrics"][0]["Dimensions"] = [["tenant_id", "host"]]
        assert emf.problems(json.dumps(unnamed)) == [
            "dimension 'host' has no string value of 1-1024 characters at the root "
            "(found None)"]

    def test_the_seeds_signals_and_the_operators_are_in_the_run(self, run):
        """cap_defer per tenant, lease_recovered from the cron sweep, queue wait, webhooks,
        failures, backlog, a start after its due time and the licence verdict all became
        data points."""
        def has(source, name, **dims):
            return any(p.name == name and dims.items() <= dict(p.dimensions).items()
                       for p in run.points(source))

        assert has("worker", "cap_defer", tenant_id="capped")
        assert has("sweep", "lease_recovered", tenant_id="crashed", host="doomed-host")
        assert has("worker", "queue_wait", tenant_id="crashed")
        assert has("worker", "started_late", tenant_id="stranger")
        assert not has("worker", "started_late", tenant_id="capped")  # (no due time)
        assert has("worker", "webhooks", outcome="delivered", tenant_id="capped")
        assert has("worker", "webhooks", outcome="failed", tenant_id="stranger")
        assert has("worker", "failures", kind="invalid_message")
        assert has("worker", "jobs", outcome="invalid", tenant_id="stranger")
        assert any(p.name == "backlog" and p.value >= 1 for p in run.points("worker"))
        assert has("worker", "webhook_oldest_pending", host="emf-host")
        assert {p.name for p in run.points("capacity")} == {
            "licence_busy_days", "licence_slow_jobs", "licence_at_capacity"}
        assert len(run.webhooks) >= 3

    def test_every_catalogued_metric_was_emitted(self, run):
        """The run reaches every metric the catalogue lists, or says why it cannot."""
        unreachable = {"borrowed": "borrowing is off by default",
                       "duplicate": "needs a message delivered twice",
                       "handed_off": "only when a parked job starts by hand-off rather "
                                     "than with the release transaction, which is timing"}
        names = {p.name for p in run.points()}
        assert set(CATALOGUE) - names <= set(unreachable)


class TestTemplateReadsTheRun:
    def test_every_metric_an_alarm_or_widget_reads_was_emitted(self, run):
        """Namespace, name, dimensions, unit and WHERE values of each read are the run's."""
        assert read_problems(Stack(), run.points()) == []

    def test_every_metric_filter_matches_a_line_of_the_run(self, run):
        """Each filter selects some line and finds its value there (slow = above 1 s here)."""
        assert filter_problems(Stack({"SlowWaitSeconds": 1}), run.lines) == []

    def test_renaming_a_metric_in_the_template_alone_fails(self, run):
        """An alarm reading ``cap_defers`` instead of ``cap_defer`` is reported."""
        template = copy.deepcopy(load())
        body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]
        body["Fn::Sub"] = body["Fn::Sub"].replace('=\\"cap_defer\\"', '=\\"cap_defers\\"')
        assert read_problems(Stack(template=template), run.points()) == [
            "cap_defer per tenant (messages deferred at the tenant's cap): reads cap_defers "
            "by ['tenant_id'], which the run never emitted"]

    def test_renaming_a_metric_in_the_code_alone_fails(self, run):
        """Lines naming ``lease_reclaimed`` leave the alarm and widget reading nothing."""
        renamed = points_of(rename_in_lines(run.lines, "lease_recovered", "lease_reclaimed"))
        assert sorted(read_problems(Stack(), renamed)) == sorted(
            f"{where}: reads lease_recovered by ['host', 'tenant_id'], which the run never "
            "emitted" for where in ("LeasesRecoveredAlarm",
                                    "lease_recovered per host (leases reclaimed from it)"))

    def test_a_dimension_change_in_the_code_alone_fails(self, run):
        """``webhooks`` without its outcome dimension fails the alarm and the widget."""
        dropped = [attrs.evolve(p, dimensions=tuple(d for d in p.dimensions if d[0] != "outcome"))
                   if p.name == "webhooks" else p for p in run.points()]
        assert {m.split(":")[0] for m in read_problems(Stack(), dropped)} == {
            "WebhooksFailedAlarm", "Webhooks by outcome; oldest due (s, right)"}

    def test_a_filter_pattern_change_alone_fails(self, run):
        """A filter selecting ``$.metric = "queue_waits"`` matches no line."""
        template = copy.deepcopy(load())
        props = template["Resources"]["JobsStartedFilter"]["Properties"]
        props["FilterPattern"] = '{ $.metric = "queue_waits" }'
        assert filter_problems(Stack({"SlowWaitSeconds": 1}, template=template), run.lines) == [
            'JobsStartedFilter: { $.metric = "queue_waits" } matches no line of the run']


class TestFilterPatterns:
    def test_patterns_select_as_cloudwatch_does(self):
        """Conjunctions, numeric comparisons and string equality select the right records."""
        slow = '{ ($.metric = "queue_wait") && ($.queue_wait > 180) }'
        assert emf.matches(slow, {"metric": "queue_wait", "queue_wait": 200})
        assert not emf.matches(slow, {"metric": "queue_wait", "queue_wait": 100})
        assert not emf.matches(slow, {"metric": "cap_defer", "queue_wait": 200})
        assert not emf.matches(slow, {"metric": "queue_wait", "queue_wait": "200"})
        assert emf.matches('{ $.metric = "queue*" }', {"metric": "queue_wait"})

    def test_an_unknown_pattern_form_is_an_error(self):
        """A term the evaluator cannot read raises, so it never passes unevaluated."""
        with pytest.raises(ValueError):
            emf.matches('{ $.metric IS NULL }', {})


class TestLogShipping:
    def test_every_unit_that_emits_metrics_is_shipped(self):
        """The worker, the cron sweep and the capacity timer each are a --unit of the log copy."""
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.read(ROOT / "deploy" / "imposer-logs.service")
        followed = {arg.split("=", 1)[1] for arg in unit["Service"]["ExecStart"].split()
                    if arg.startswith("--unit=")}
        emitting = set()
        for path in (ROOT / "systemd").glob("*.service"):
            service = configparser.ConfigParser(strict=False, interpolation=None)
            service.read(path)
            if "/bin/imposer " in service["Service"]["ExecStart"] + " ":
                emitting.add(path.name)
        assert emitting == {"imposer.service", "imposer-sweep.service",
                            "imposer-capacity.service"}
        assert followed == emitting


class TestDocs:
    def test_the_metrics_table_is_the_catalogue(self):
        """The Metrics table of docs/operations.rst lists each catalogued metric with its unit
        and dimensions."""
        text = (ROOT / "docs" / "operations.rst").read_text()
        section = text.split("\nMetrics\n-------\n", 1)[1].split("\n-----", 1)[0]
        rows = re.findall(r"^``(\w+)``\s+(\w+)\s{2,}(\S.*?)\s{2,}\S", section, re.MULTILINE)
        assert {name: (unit, dims) for name, unit, dims in rows} == {
            name: (m.unit, ", ".join(m.dimensions) or "(none)") for name, m in CATALOGUE.items()}

    def test_every_alarm_says_what_to_do(self):
        """Each alarm of the template has its row in the runbook's alarm table
        (docs/operations.rst), and no other does."""
        text = (ROOT / "docs" / "operations.rst").read_text()
        section = text.split("Alarm                      Fires when", 1)[1].split("\n\n", 1)[0]
        named = set(re.findall(r"^``(\w+Alarm)``", section, re.MULTILINE))
        alarms = set(Stack().of_type("AWS::CloudWatch::Alarm")) | set(
            Stack().of_type("AWS::CloudWatch::CompositeAlarm"))
        # the composite's two halves notify only through it; its row explains both
        assert named == alarms - {"BusySlotsAlarm", "LongWaitsAlarm"}

    def test_readme_summary_names_every_alarm(self):
        """README's alarm summary names each alarm that notifies, and no other."""
        text = (ROOT / "README.rst").read_text()
        section = text.split("\nMetrics and alarms\n------------------\n", 1)[1]
        section = section.split("\n-----", 1)[0]
        named = set(re.findall(r"``(\w+Alarm)``", section))
        alarms = set(Stack().of_type("AWS::CloudWatch::Alarm")) | set(
            Stack().of_type("AWS::CloudWatch::CompositeAlarm"))
        assert named == alarms - {"BusySlotsAlarm", "LongWaitsAlarm"}


class TestAlarms:
    def test_every_alarm_that_notifies_also_says_when_it_is_ok(self):
        """An alarm with alarm actions has the same topic as its OK action."""
        stack = Stack()
        alarms = {**stack.of_type("AWS::CloudWatch::Alarm"),
                  **stack.of_type("AWS::CloudWatch::CompositeAlarm")}
        notifying = {k: a for k, a in alarms.items() if a.get("AlarmActions")}
        assert {k: a.get("OKActions") for k, a in notifying.items()
                if a.get("OKActions") != a["AlarmActions"]} == {}
        assert set(alarms) - set(notifying) == {"BusySlotsAlarm", "LongWaitsAlarm"}
