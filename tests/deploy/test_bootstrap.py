"""deploy/bootstrap-host.sh on this machine: a licensed host made on a local stack with IAM on.

What the host stack's user data does on EC2 is done here in its order: the shared stack's
EnvFile output is written to stack.env, the bootstrap is fetched from the bucket and run.
Under it are the real parts: the wheel built from this checkout (its units and agent config
inside), the shared bucket, the licence key in Parameter Store, and the host's credentials
holding exactly WorkerPolicy and the host template's BootstrapPolicy, judged by the IAM
stack. Replaced: pdfToolbox by the fake executable (in a .tar.gz installer, unpacked by the
bootstrap's default install step), the licence activation by a stub the bootstrap calls
through PDFTOOLBOX_ACTIVATE, and systemd and the CloudWatch agent's control script, which a
container lacks, by stand-ins (tests/deploy/bin/) that run the installed units as written.
"""

from __future__ import annotations

import getpass
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import attrs
import boto3
import pytest
from click.testing import CliRunner

from imposer.cli import main
from imposer.client import submit
from imposer.client.aws import Aws
from imposer.dev.samples import numbered_pdf
from imposer.settings import Settings
from imposer.state.provision import provision
from tests.deploy.conftest import ANYONE, ROOT, Identity, aws_as, create_user, tenant_statements
from tests.deploy.emf import is_metric_line, problems
from tests.deploy.template import HOST_TEMPLATE, Stack, load
from tests.fixtures.workers import layout, wait_for

pytestmark = pytest.mark.slow

BIN = Path(__file__).resolve().parent / "bin"
FAKE_TOOL = ROOT / "scripts" / "fake-pdftoolbox"
HOSTNAME = os.uname().nodename
KEY = "PTB-" + uuid.uuid4().hex.upper()
#: Test-sized worker timings, as the shared stack's settings would carry them.
TIMINGS = {"IMPOSER_HEARTBEAT_SECONDS": "0.5", "IMPOSER_LEASE_TTL_SECONDS": "5",
           "IMPOSER_DEFER_SECONDS": "0.3", "IMPOSER_SWEEP_SECONDS": "0.5",
           "IMPOSER_POLL_SECONDS": "1", "IMPOSER_RETRY_SECONDS": "0",
           "IMPOSER_ROLLUP_SECONDS": "0.5", "IMPOSER_GRACE_SECONDS": "30",
           "IMPOSER_BOOT_RETRY_SECONDS": "5"}


@attrs.define
class Host:
    """One bootstrapped host: its stacks, its paths, what its runs printed."""

    shared: Stack
    stack: Stack
    settings: Settings
    identity: Identity
    tenant: Identity
    root: Path
    env: dict[str, str]
    runs: list[subprocess.CompletedProcess] = attrs.Factory(list)

    @property
    def state(self) -> Path:
        return self.root / "systemctl"

    def path(self, variable: str) -> Path:
        return Path(self.env[variable])

    def bootstrap(self, script: Path, **changes: str) -> subprocess.CompletedProcess:
        run = subprocess.run(["bash", str(script)], env={**self.env, **changes},
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=600)
        self.runs.append(run)
        return run

    def systemctl(self, *args: str) -> int:
        return subprocess.run([str(BIN / "systemctl"), *args], env=self.env,
                              stdin=subprocess.DEVNULL).returncode

    def jsonl(self, name: str) -> list:
        path = self.state / name
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built from a copy (the build writes beside the sources)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check", "-w", str(work),
                    str(source)], check=True, stdin=subprocess.DEVNULL)
    return next(work.glob("imposer-*.whl"))


def installer() -> bytes:
    """A pdfToolbox installer as callas ships it (a .tar.gz), holding the fake tool."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        tar.add(FAKE_TOOL, arcname="pdfToolbox")
    return out.getvalue()


@pytest.fixture(scope="module")
def host(iam_stack, wheel, tmp_path_factory) -> Host:
    """Provision the shared stack's resources, store the software and the key, then bootstrap."""
    root = tmp_path_factory.mktemp("host")
    tag = uuid.uuid4().hex[:8]
    shared = Stack({"QueueName": f"q-{tag}", "DlqName": f"q-{tag}-dlq",
                    "TablePrefix": f"t-{tag}", "BucketName": f"b-{tag}", "Slots": 2,
                    "DefaultCap": 2})
    stack = Stack({"HostName": HOSTNAME, "SubnetId": "subnet-0a1b2c3d", "SecurityGroupIds":
                   "sg-0a1b2c3d", "WheelKey": f"deploy/{wheel.name}",
                   "InstallerKey": "deploy/pdfToolboxCLI-15.0-Linux64.tar.gz",
                   "LicenceParameter": f"/imposer/licence/{HOSTNAME}",
                   "ActivateCommand": str(BIN / "activate-licence"), "RunsTimers": "true"},
                  template=load(HOST_TEMPLATE), name=f"imposer-{HOSTNAME}", imports=shared)
    stack_env = dict(line.split("=", 1) for line in shared.output("EnvFile").splitlines())
    settings = Settings.load({**stack_env, **TIMINGS})
    with aws_as(iam_stack.url, ANYONE):
        provision(settings)
        s3 = boto3.session.Session().client("s3")
        s3.upload_file(str(wheel), settings.bucket, stack.parameters["WheelKey"])
        s3.put_object(Bucket=settings.bucket, Key=stack.parameters["InstallerKey"],
                      Body=installer())
        s3.upload_file(str(ROOT / "deploy" / "bootstrap-host.sh"), settings.bucket,
                       "deploy/bootstrap-host.sh")
        ssm = boto3.session.Session().client("ssm")
        ssm.put_parameter(Name=stack.parameters["LicenceParameter"], Value=KEY,
                          Type="SecureString")
        ssm.put_parameter(Name="/imposer/licence/another-host", Value="PTB-NOT-YOURS",
                          Type="SecureString")
        iam = boto3.session.Session().client("iam")
        # The host role's policies: the imported WorkerPolicy and LogShippingPolicy, its own
        # BootstrapPolicy.
        identity = create_user(iam, "imposer-host", shared.statements("WorkerPolicy")
                               + shared.statements("LogShippingPolicy")
                               + stack.statements("BootstrapPolicy"))
        boto3.session.Session().client("logs").create_log_group(
            logGroupName=shared.output("LogGroupName"))
        tenant = create_user(iam, "tenant-a", tenant_statements(shared, "tenant-a"), "tenant-a")
        bound = CliRunner().invoke(main, ["tenants", "set", "tenant-a", "--sender",
                                          tenant.user_id], env={**stack_env, **TIMINGS},
                                   catch_exceptions=False)
        assert bound.exit_code == 0, bound.output
    aws = identity.env(iam_stack.url)
    etc = root / "etc" / "imposer"
    etc.mkdir(parents=True)
    # What the user data writes from the shared stack's EnvFile output; on a real host the
    # AWS identity comes from the instance profile, here from the file as well.
    (etc / "stack.env").write_text("\n".join(
        [shared.output("EnvFile")] + [f"{k}={v}" for k, v in {**TIMINGS, **aws}.items()]
        + [f"FAKE_PDFTOOLBOX_LICENCE_FILE={root / 'licence.dat'}"]) + "\n")
    user_data = stack.resolve(stack.template["Resources"]["Host"]["Properties"]["UserData"])
    variables = bootstrap_variables(user_data["Fn::Base64"])
    env = {
        "PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(root), "LANG": "C.UTF-8",
        **aws, **variables,
        "PYTHON": sys.executable, "IMPOSER_PREFIX": str(root / "opt" / "imposer"),
        "IMPOSER_ETC": str(etc), "PDFTOOLBOX_HOME": str(root / "opt" / "callas"),
        "IMPOSER_USER": getpass.getuser(), "IMPOSER_WORK": str(root / "var" / "lib" / "imposer"),
        "IMPOSER_LOG_FILE": str(root / "var" / "log" / "imposer" / "worker.jsonl"),
        "SYSTEMD_DIR": str(root / "systemd"), "LOGROTATE_DIR": str(root / "logrotate.d"),
        "SYSTEMCTL": str(BIN / "systemctl"), "SYSTEMCTL_STATE": str(root / "systemctl"),
        "CWAGENT_CTL": str(BIN / "amazon-cloudwatch-agent-ctl"),
        "CWAGENT_CONFIG": str(root / "cwagent" / "imposer.json"),
        "LICENCE_STUB_KEY": KEY, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE",
                 "XDG_CACHE_HOME", "PIP_CACHE_DIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    for directory in ("systemd", "logrotate.d"):
        (root / directory).mkdir()
    made = Host(shared=shared, stack=stack, settings=settings, identity=identity,
                tenant=tenant, root=root, env=env)
    iam_stack.enforce()
    # The user data's `aws s3 cp` of the bootstrap, under the host's own credentials.
    with aws_as(iam_stack.url, identity):
        fetched = root / "imposer-bootstrap"
        boto3.session.Session().client("s3").download_file(
            settings.bucket, "deploy/bootstrap-host.sh", str(fetched))
    made.bootstrap(fetched)
    yield made
    made.systemctl("stop", "imposer.service", "imposer-logs.service")


def bootstrap_variables(user_data: str) -> dict[str, str]:
    """The variables the user data writes to bootstrap.env, as the shell would read them."""
    body = user_data.split("<<'BOOTSTRAP_ENV'\n", 1)[1].split("\nBOOTSTRAP_ENV", 1)[0]
    return {k: v.strip("'") for k, v in (line.split("=", 1) for line in body.splitlines())}


def env_rows(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as systemd reads an EnvironmentFile (a later line wins)."""
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line and not line.startswith("#"))


def ship(host: Host, url: str) -> int:
    """Do the CloudWatch agent's work once, under the host's credentials: put the log
    file's lines into the stack's log group, in the stream named after the host."""
    lines = [line for line in host.path("IMPOSER_LOG_FILE").read_text().splitlines() if line]
    written = int(host.path("IMPOSER_LOG_FILE").stat().st_mtime * 1000)
    group = host.shared.output("LogGroupName")
    with aws_as(url, host.identity):
        logs = boto3.session.Session().client("logs")
        logs.create_log_stream(logGroupName=group, logStreamName=HOSTNAME)
        logs.put_log_events(logGroupName=group, logStreamName=HOSTNAME, logEvents=[
            {"timestamp": written, "message": line} for line in lines])
    return len(lines)


def worker_lines(host: Host) -> list[dict]:
    path = host.path("IMPOSER_LOG_FILE")
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


class TestBootstrap:
    def test_the_worker_ends_up_running(self, host):
        """The bootstrap exits 0 saying so; the unit's main process is alive."""
        run = host.runs[0]
        assert run.returncode == 0, run.stderr[-3000:]
        assert "bootstrap: the worker is running" in run.stderr
        assert host.systemctl("is-active", "--quiet", "imposer.service") == 0

    def test_doctor_passed_before_the_worker_started(self, host):
        """Doctor ran (by the bootstrap and the unit's ExecStartPre) and found nothing failed."""
        doctor = host.runs[0].stderr.split("bootstrap: imposer doctor", 1)[1]
        checks = {line[8:51].strip(): (line.split()[0], line[51:].strip())
                  for line in doctor.splitlines() if line.startswith("  ")}
        assert checks["tool version"] == ("ok", "pdfToolbox (fake) 15.0")
        assert checks["licence"][0] == "ok" and "8 parallel processes" in checks["licence"][1]
        assert checks["log shipping"][0] == "warn"  # the file is new: nothing to look for yet
        assert [name for name, (status, _) in checks.items() if status == "fail"] == []
        assert "all checks passed" in doctor
        calls = host.jsonl("calls.jsonl")
        assert ["enable", "--now", "imposer.service"] in calls

    def test_a_job_runs_on_it(self, host, tmp_path):
        """A tenant's job, submitted under its own policy, succeeds on the bootstrapped worker."""
        with aws_as(host.env["AWS_ENDPOINT_URL"], host.tenant):
            job = submit("tenant-a", numbered_pdf(tmp_path / "art.pdf", 2), layout(),
                         aws=Aws(), bucket=host.settings.bucket,
                         queue=host.settings.queue_name).job_id
        runner = CliRunner()
        env = {f"IMPOSER_{k}": v for k, v in {
            "QUEUE": host.settings.queue_name, "TABLE_PREFIX": host.settings.table_prefix,
            "BUCKET": host.settings.bucket}.items()}
        last = []

        def status():
            # As the host's identity and nothing else: a session token another test left in
            # this process's environment would make every call fail to authenticate.
            with aws_as(host.env["AWS_ENDPOINT_URL"], host.identity):
                out = runner.invoke(main, ["jobs", "--tenant", "tenant-a", "--json"], env=env)
            last[:] = [out.exit_code, out.output[-2000:]]
            rows = json.loads(out.output) if out.exit_code == 0 else []
            return next((r["status"] for r in rows if r["job_id"] == job
                         and r["status"] in ("succeeded", "failed")), None)

        try:
            finished = wait_for(status, 120, f"job {job} to finish")
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}; `imposer jobs` last gave {last}") from None
        assert finished == "succeeded"

    def test_the_env_file_is_the_stacks_and_the_hosts(self, host):
        """imposer.env holds each stack setting and this host's own; only its group reads it."""
        path = host.path("IMPOSER_ETC") / "imposer.env"
        rows = env_rows(path)
        written = env_rows(host.path("IMPOSER_ETC") / "stack.env")
        assert set(written) - set(rows) == set()
        assert {k: rows[k] for k in written} == written
        assert {line.split("=", 1)[0] for line in host.shared.output("EnvFile").splitlines()} \
            <= set(rows)
        assert rows["IMPOSER_HOST_ID"] == HOSTNAME
        assert rows["IMPOSER_PDFTOOLBOX"] == str(host.path("PDFTOOLBOX_HOME") / "pdfToolbox")
        assert rows["IMPOSER_LOG_GROUP"] == host.shared.output("LogGroupName")
        assert oct(path.stat().st_mode & 0o777) == "0o640"

    def test_the_units_installed_are_the_wheels(self, host):
        """Every unit is installed, with this host's paths; the timers run on this host."""
        installed = {p.name for p in host.path("SYSTEMD_DIR").iterdir()}
        assert installed == {p.name for p in (ROOT / "systemd").iterdir()} | {"imposer-logs.service"}
        worker = (host.path("SYSTEMD_DIR") / "imposer.service").read_text()
        assert f"ExecStart={host.env['IMPOSER_PREFIX']}/.venv/bin/imposer run" in worker
        assert f"EnvironmentFile={host.env['IMPOSER_ETC']}/imposer.env" in worker
        assert {p.name for p in (host.state / "timers").iterdir()} == {
            "imposer-sweep.timer", "imposer-capacity.timer"}

    def test_its_log_lines_are_shaped_for_the_agent(self, host):
        """The agent ships the file imposer-logs.service fills, to the stack's log group, in
        this host's stream; the file holds the worker's JSON lines and valid EMF records."""
        agent = host.jsonl("agent.jsonl")
        assert len(agent) == 1 and agent[0]["args"][:2] == ["-a", "fetch-config"]
        (shipped,) = agent[0]["config"]["logs"]["logs_collected"]["files"]["collect_list"]
        assert shipped["file_path"] == host.env["IMPOSER_LOG_FILE"]
        assert shipped["log_group_name"] == host.shared.output("LogGroupName")
        assert shipped["log_stream_name"] == "{hostname}"
        logs_unit = (host.path("SYSTEMD_DIR") / "imposer-logs.service").read_text()
        assert f"StandardOutput=append:{host.env['IMPOSER_LOG_FILE']}" in logs_unit
        path = host.path("IMPOSER_LOG_FILE")
        metric_lines = wait_for(lambda: [line for line in path.read_text().splitlines() if line.startswith("{")
                                         if is_metric_line(json.loads(line))], 60,
                                "an EMF line in the shipped file")
        assert {line: problems(line) for line in metric_lines} == {
            line: [] for line in metric_lines}
        assert {r.get("host") for r in worker_lines(host) if "host" in r} == {HOSTNAME}

    def test_the_licence_key_reached_the_activation_only(self, host):
        """The stub got the key on its standard input, once; no file or output holds it."""
        activations = host.jsonl("activations.jsonl")
        assert [a["accepted"] for a in activations] == [True]
        assert all(KEY not in arg for a in activations for arg in a["argv"])
        assert KEY not in host.runs[0].stderr + host.runs[0].stdout
        for path in host.root.rglob("*"):
            if path.is_file() and path.stat().st_size < 5_000_000 and ".venv" not in path.parts:
                assert KEY.encode() not in path.read_bytes(), path


class TestLeastPrivilege:
    def test_nothing_the_host_did_was_denied(self, host, iam_stack):
        denied = [d for d in iam_stack.decisions(host.identity.arn) if not d["allowed"]]
        assert denied == []

    def test_every_bootstrap_grant_was_used(self, host, iam_stack):
        """Each resource of BootstrapPolicy was read, but the stack signal (the user data's
        cfn-signal, which needs CloudFormation)."""
        used = {(d["action"], d["resource"]) for d in iam_stack.decisions(host.identity.arn)
                if d["allowed"]}
        for statement in host.stack.statements("BootstrapPolicy"):
            if statement["Sid"] == "SignalOwnStack":
                continue
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                assert (statement["Action"], resource) in used, (statement["Action"], resource)

    def test_the_host_cannot_read_another_hosts_licence(self, host, iam_stack):
        with aws_as(iam_stack.url, host.identity):
            ssm = boto3.session.Session().client("ssm")
            with pytest.raises(Exception) as denied:
                ssm.get_parameter(Name="/imposer/licence/another-host", WithDecryption=True)
        assert "AccessDenied" in str(denied.value) or "403" in str(denied.value)


class TestDayTwo:
    def test_stop_drains_and_an_upgrade_run_starts_it_again(self, host, iam_stack):
        """`systemctl stop` drains (exit 0); the bootstrap run again installs the wheel,
        keeps the licence without activating again, and starts the worker, its doctor
        finding the log file's newest line shipped."""
        assert host.systemctl("stop", "imposer.service") == 0
        assert (host.state / "status" / "imposer.service").read_text() == "0"
        # the drain's lines are in the file once imposer-logs.service has copied them
        wait_for(lambda: any(r.get("action") == "stopped" for r in worker_lines(host)), 30,
                 "the drain's last line in the shipped file")
        assert ship(host, iam_stack.url) > 0
        again = host.bootstrap(host.root / "imposer-bootstrap")
        assert again.returncode == 0, again.stderr[-3000:]
        shipping = next(line for line in again.stderr.splitlines()
                        if line.startswith("  ") and "log shipping" in line)
        assert shipping.split()[0] == "ok", shipping
        assert "a licence is active: not activating again" in again.stderr
        assert "pdfToolbox is installed" in again.stderr
        assert len(host.jsonl("activations.jsonl")) == 1
        assert host.systemctl("is-active", "--quiet", "imposer.service") == 0

    def test_a_wrong_key_starts_no_worker(self, host, tmp_path):
        """A host whose key the activation refuses (its tool installed by a PDFTOOLBOX_INSTALL
        command): the bootstrap fails saying why, no licence is active, and the worker is
        never started."""
        etc = tmp_path / "etc"
        etc.mkdir()
        text = (host.path("IMPOSER_ETC") / "stack.env").read_text()
        (etc / "stack.env").write_text(text.replace(str(host.root / "licence.dat"),
                                                    str(tmp_path / "licence.dat")))
        state = tmp_path / "systemctl"
        run = host.bootstrap(host.root / "imposer-bootstrap", IMPOSER_ETC=str(etc),
                             PDFTOOLBOX_HOME=str(tmp_path / "callas"),
                             SYSTEMCTL_STATE=str(state), SYSTEMD_DIR=str(host.root / "systemd"),
                             LICENCE_STUB_KEY="PTB-SOMETHING-ELSE",
                             PDFTOOLBOX_INSTALL='mkdir -p "$PDFTOOLBOX_HOME" && '
                                                'tar -xzf "$1" -C "$PDFTOOLBOX_HOME"')
        assert run.returncode == 1
        assert "FAILED: the licence activation failed" in run.stderr
        assert (tmp_path / "callas" / "pdfToolbox").exists()  # PDFTOOLBOX_INSTALL ran
        assert not (tmp_path / "licence.dat").exists()
        assert not (etc / "imposer.env").exists()
        calls = [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()] \
            if (state / "calls.jsonl").exists() else []
        assert not any("imposer.service" in call for call in calls)
