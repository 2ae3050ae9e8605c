"""Every command, through bad environments and bad arguments: one line, the documented code.

The table is what a person sees: stderr holds exactly one line starting
``imposer: ``, no traceback, and the exit code is the one README's table
gives the failure. Commands run through ``imposer``'s own ``main`` (click's
runner, in this process, for speed); ``run`` starts a pool and signal
handlers, so it runs as a real subprocess.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from imposer.cli import main
from imposer.dev.samples import A5, numbered_pdf
from imposer.models.exits import Exit
from tests.fixtures.aws import env_for

#: A command line per command that works in a good environment (``{tmp}``: a fresh folder).
COMMANDS = {
    "sweep": ["sweep", "--once"],
    "init": ["init"],
    "leases": ["leases"],
    "tenants set": ["tenants", "set", "acme", "--cap", "2"],
    "tenants list": ["tenants", "list"],
    "webhooks list": ["webhooks", "list"],
    "webhooks redeliver": ["webhooks", "redeliver", "msg_" + "0" * 32],
    "jobs": ["jobs", "--tenant", "acme"],
    "why": ["why", "job1"],
    "stats": ["stats"],
    "capacity": ["capacity"],
    "fetch": ["fetch", "job1", "-o", "{tmp}/plate.pdf"],
    "submit": ["submit", "--tenant", "acme", "--pdf", "{tmp}/a5.pdf", "--layout",
               "a5-4up-sra3"],
    "doctor": ["doctor", "--engine", "open"],
    "simulate": ["simulate", "--no-search"],
    "run": ["run", "--engine", "open", "--exit-when-idle"],
}
#: Options that take a command down another path to AWS: each meets the bad environments too.
VARIANTS = {
    "init --check": ["init", "--check"],
    "capacity --emit": ["capacity", "--emit"],
    "tenants set --sender": ["tenants", "set", "acme", "--sender", "AIDAEXAMPLE"],
}
#: Commands that never ask AWS (their bad arguments are in BAD_ARGUMENTS).
LOCAL = {"layouts", "impose", "local", "demo"}

#: Environment -> (changes, exit code of an AWS command, of doctor's checklist).
ENVIRONMENTS = {
    "no credentials": ({"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None,
                        "AWS_SESSION_TOKEN": None, "AWS_PROFILE": None,
                        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
                        "AWS_CONFIG_FILE": "/nonexistent/config",
                        "AWS_EC2_METADATA_DISABLED": "true"}, Exit.CONFIG),
    "malformed endpoint": ({"AWS_ENDPOINT_URL": "htp:/bad"}, Exit.CONFIG),
    "endpoint with a space": ({"AWS_ENDPOINT_URL": "{endpoint} "}, Exit.CONFIG),
    "unreachable endpoint": ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, Exit.BACKEND),
    "web page endpoint": ({"AWS_ENDPOINT_URL": "{html}"}, Exit.BACKEND),
    "empty-reply endpoint": ({"AWS_ENDPOINT_URL": "{empty}"}, Exit.BACKEND),
    "bad log level": ({"IMPOSER_LOG_LEVEL": "LOUD"}, Exit.USAGE),
}
#: `submit` is the tenant client's: an upload that AWS refuses or never answers is its 13.
SUBMIT_FAILS = {"no credentials", "unreachable endpoint", "web page endpoint",
                "empty-reply endpoint"}

HUGE = "1" + "0" * 41
LONG = "x" * 5000
#: (case, arguments, exit code); ``{fifo}``, ``{tmp}``: made by the test.
BAD_ARGUMENTS = [
    ("huge cap", ["tenants", "set", "acme", "--cap", HUGE], Exit.USAGE),
    ("huge limit", ["jobs", "--limit", HUGE], Exit.USAGE),
    ("huge window", ["stats", "--since", HUGE + "d"], Exit.USAGE),
    ("huge capacity window", ["capacity", "--since", HUGE + "d"], Exit.USAGE),
    ("huge slots", ["simulate", "--synthetic", "a=2", "--slots", HUGE], Exit.USAGE),
    ("huge port", ["local", "--port", "99999"], Exit.USAGE),
    ("pdf is /dev/zero", ["submit", "--tenant", "acme", "--pdf", "/dev/zero", "--layout",
                          "a5-4up-sra3"], Exit.USAGE),
    ("pdf is a FIFO", ["submit", "--tenant", "acme", "--pdf", "{fifo}", "--layout",
                       "a5-4up-sra3"], Exit.USAGE),
    ("pdf is a directory", ["submit", "--tenant", "acme", "--pdf", "{tmp}", "--layout",
                            "a5-4up-sra3"], Exit.USAGE),
    ("impose /dev/zero", ["impose", "a5-4up-sra3", "/dev/zero", "{tmp}/out.pdf"], Exit.USAGE),
    ("impose a FIFO", ["impose", "a5-4up-sra3", "{fifo}", "{tmp}/out.pdf"], Exit.USAGE),
    ("layout is a FIFO", ["impose", "{fifo}", "{tmp}/a5.pdf", "{tmp}/out.pdf"], Exit.USAGE),
    ("impose to -", ["impose", "a5-4up-sra3", "{tmp}/a5.pdf", "-"], Exit.USAGE),
    ("impose to a directory", ["impose", "a5-4up-sra3", "{tmp}/a5.pdf", "{tmp}"], Exit.USAGE),
    ("impose into no directory", ["impose", "a5-4up-sra3", "{tmp}/a5.pdf",
                                  "/nonexistent/out.pdf"], Exit.FAILED),
    ("impose into /proc", ["impose", "a5-4up-sra3", "{tmp}/a5.pdf", "/proc/out.pdf"],
     Exit.FAILED),
    ("export is /dev/zero", ["simulate", "--from-export", "/dev/zero"], Exit.USAGE),
    ("fetch into no directory", ["fetch", "job1", "-o", "/nonexistent/x.pdf"], Exit.FAILED),
    ("chart into no directory", ["capacity", "--chart", "/nonexistent/c.png"], Exit.FAILED),
    ("garbage cursor", ["jobs", "--tenant", "acme", "--cursor", "garbage"], Exit.USAGE),
    ("JSON cursor of nothing", ["jobs", "--tenant", "acme", "--cursor", '{"a": 1}'],
     Exit.USAGE),
    ("another tenant's cursor", ["jobs", "--tenant", "acme", "--cursor",
                                 '{"job_id": "x", "tenant_id": "zeta", "submitted_at": 1}'],
     Exit.USAGE),
    ("empty tenant", ["tenants", "set", "", "--cap", "1"], Exit.USAGE),
    ("over-long tenant", ["tenants", "set", LONG, "--cap", "1"], Exit.USAGE),
    ("empty job id", ["why", ""], Exit.USAGE),
    ("over-long job id", ["why", LONG], Exit.USAGE),
    ("over-long submit tenant", ["submit", "--tenant", LONG, "--pdf", "{tmp}/a5.pdf",
                                 "--layout", "a5-4up-sra3"], Exit.USAGE),
    ("empty event id", ["webhooks", "redeliver", ""], Exit.USAGE),
    ("webhook host with a path", ["tenants", "set", "acme", "--webhook-host", "http://x/y"],
     Exit.USAGE),
    ("table prefix with a slash", ["init", "--table-prefix", "Bad/Prefix"], Exit.USAGE),
    ("empty sender", ["tenants", "set", "acme", "--sender", ""], Exit.USAGE),
    ("over-long sender", ["tenants", "set", "acme", "--sender", LONG], Exit.USAGE),
    ("an ARN as a sender", ["tenants", "set", "acme", "--sender", "arn:x"], Exit.USAGE),
    ("a default cap on one tenant", ["tenants", "set", "acme", "--default-cap", "6"],
     Exit.USAGE),
    ("free-text engine", ["doctor", "--engine", "fast"], Exit.USAGE),
    ("free-text log level", ["leases", "--log-level", "LOUD"], Exit.USAGE),
    ("over-long layout", ["impose", LONG, "{tmp}/a5.pdf", "{tmp}/out.pdf"], Exit.USAGE),
]


class _Server(BaseHTTPRequestHandler):
    """Something that is not AWS: a web page, or a 400 with an empty body."""

    def do_POST(self):  # noqa: N802
        html = self.server.html
        body = b"<!doctype html><html><body>Not here</body></html>" if html else b""
        self.send_response(404 if html else 400)
        self.send_header("Content-Type", "text/html" if html else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_HEAD = do_POST

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def not_aws():
    """Two HTTP servers where AWS should be: one answers a web page, one an empty 400."""
    servers = {}
    for name, html in (("html", True), ("empty", False)):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
        server.html = html
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    yield {name: f"http://127.0.0.1:{s.server_port}" for name, s in servers.items()}
    for server in servers.values():
        server.shutdown()


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """The files the command lines name: an A5 PDF and a FIFO (nothing here writes them)."""
    folder = tmp_path_factory.mktemp("place")
    numbered_pdf(folder / "a5.pdf", 4, *A5)
    os.mkfifo(folder / "fifo")
    return {"tmp": str(folder), "fifo": str(folder / "fifo")}


@pytest.fixture(scope="module")
def provisioned(aws_endpoint):
    """One provisioned stack for the module: these calls fail before they change anything."""
    import uuid

    from imposer.settings import Settings
    from imposer.state.provision import provision

    tag = uuid.uuid4().hex[:10]
    made = Settings.load({}, queue_name=f"q-{tag}", dlq_name=f"q-{tag}-dlq", bucket=f"b-{tag}",
                         table_prefix=f"t-{tag}")
    provision(made)
    return made


@pytest.fixture(autouse=True)
def imposer_logger():
    """Put the imposer logger back as it was: a command sets it up on the runner's stderr."""
    log = logging.getLogger("imposer")
    saved = (log.handlers[:], log.level, log.propagate)
    yield
    log.handlers[:], log.level, log.propagate = saved[0], saved[1], saved[2]


def invoke(args: list[str], env: dict) -> tuple[int, str, str]:
    """Run `imposer ARGS` as a person would; (exit code, stdout, stderr)."""
    if args[0] == "run":
        full = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
        got = subprocess.run([sys.executable, "-m", "imposer", *args], env=full,
                             capture_output=True, text=True, timeout=120)
        return got.returncode, got.stdout, got.stderr
    result = CliRunner().invoke(main, args, env=env, prog_name="imposer")
    return result.exit_code, result.stdout, result.stderr


def one_line(code: int, err: str, want: int) -> None:
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("imposer: "), err
    assert code == want, (code, err)


def fill(args: list[str], values: dict) -> list[str]:
    return [a.format(**values) if "{tmp}" in a or "{fifo}" in a else a for a in args]


def leaves(group, path=()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from leaves(command, (*path, name))
        else:
            yield " ".join((*path, name))


class TestEveryCommand:
    def test_the_table_covers_every_command(self):
        """Each command of `imposer` is in the table (AWS ones) or known to need no AWS."""
        assert set(leaves(main)) == set(COMMANDS) | LOCAL

    @pytest.mark.parametrize("command", sorted(set(COMMANDS) | LOCAL | {"tenants", "webhooks"}))
    def test_help(self, command):
        """`--help` of every command prints its help, nothing on stderr, exit 0."""
        code, out, err = invoke([*command.split(), "--help"], {})
        assert (code, err) == (0, "") and "Usage: imposer" in out

    @pytest.mark.parametrize("where", sorted(ENVIRONMENTS))
    @pytest.mark.parametrize("command", sorted(COMMANDS) + sorted(VARIANTS))
    def test_bad_environment(self, provisioned, not_aws, place, command, where):
        """A command in a broken environment says so in one line with the documented code."""
        changes, want = ENVIRONMENTS[where]
        env = {**env_for(provisioned), "IMPOSER_BOOT_RETRY_SECONDS": "0"}
        values = {"endpoint": env["AWS_ENDPOINT_URL"], **not_aws}
        env.update({k: v if v is None else v.format(**values) for k, v in changes.items()})
        if command == "doctor" and want != Exit.USAGE:
            want = Exit.CONFIG  # its checklist says what failed; any failure exits 3
        if command == "submit" and where in SUBMIT_FAILS:
            want = Exit.SUBMIT_FAILED
        code, _, err = invoke(fill({**COMMANDS, **VARIANTS}[command], place), env)
        one_line(code, err, want)

    @pytest.mark.parametrize("case", BAD_ARGUMENTS, ids=lambda c: c[0])
    def test_bad_argument(self, provisioned, place, case):
        """A bad argument is one line with its code, before anything is read or written."""
        _, args, want = case
        code, _, err = invoke(fill(args, place), env_for(provisioned))
        one_line(code, err, want)

    def test_no_credentials_with_a_local_stack_up_says_where_it_is(self, settings):
        """No credentials and no endpoint while `imposer local` listens on its port: the line
        says to export what it prints."""
        from imposer.aws import session
        from imposer.dev.localstack.stack import LocalStack

        try:
            stack = LocalStack(session.LOCAL_PORT).start()
        except (OSError, SystemExit):  # werkzeug exits when the port is taken
            pytest.skip(f"port {session.LOCAL_PORT} is taken")
        try:
            env = {**env_for(settings), **ENVIRONMENTS["no credentials"][0],
                   "AWS_ENDPOINT_URL": None}
            code, _, err = invoke(["leases"], env)
        finally:
            stack.stop()
        one_line(code, err, Exit.CONFIG)
        assert "export the AWS_ENDPOINT_URL" in err


class TestPaging:
    def test_the_printed_cursor_goes_on(self, settings, backends):
        """The cursor `jobs --tenant` prints is one it takes: the second page follows the first."""
        from imposer.models import JobStatus

        for n in range(3):
            backends.jobs.finish_unleased("acme", f"job{n}", JobStatus.FAILED, "x", "bad_pdf",
                                          submitted_at=1000.0 + n)
        env = env_for(settings)
        code, out, err = invoke(["jobs", "--tenant", "acme", "--limit", "2"], env)
        assert code == 0 and err.startswith("more: --cursor '"), err
        cursor = err.split("'")[1]
        code, out2, err2 = invoke(["jobs", "--tenant", "acme", "--limit", "2", "--cursor",
                                   cursor], env)
        assert code == 0 and "job0" in out2 and "job0" not in out and err2 == ""


class TestOptions:
    @pytest.mark.parametrize("command", ["jobs", "stats", "capacity", "simulate"])
    def test_one_name_for_a_time_window(self, command):
        """Every command with a time window calls it --since; old spellings are not offered."""
        _, out, _ = invoke([command, "--help"], {})
        assert "--since DURATION" in out and "--window" not in out and "--days" not in out

    def test_old_window_spellings_still_work_and_say_so(self, provisioned):
        """`capacity --window` and `simulate --days` run as before, with a deprecation line."""
        env = env_for(provisioned)
        for args in (["capacity", "--window", "7d", "--json"],
                     ["simulate", "--days", "7", "--json", "--no-search"]):
            code, out, err = invoke(args, env)
            assert code == 0 and out.startswith("{"), err
            assert "deprecated" in err and "--since" in err and "Traceback" not in err

    def test_the_override_option_says_what_it_does(self, provisioned):
        """--clear-cap drops the override; its old name --default-cap-override still does,
        with a deprecation line."""
        env = env_for(provisioned)
        assert invoke(["tenants", "set", "acme", "--cap", "2"], env)[0] == 0
        code, out, err = invoke(["tenants", "set", "acme", "--default-cap-override"], env)
        assert code == 0 and "cap 4 (default)" in out and "say --clear-cap" in err
        _, help_text, _ = invoke(["tenants", "set", "--help"], {})
        assert "--clear-cap" in help_text and "--default-cap-override" not in help_text

    @pytest.mark.parametrize("option, choices", [("--engine", "[pdftoolbox|open]"),
                                                 ("--log-level", "[debug|info|warning|error")])
    def test_closed_sets_are_choices(self, option, choices):
        """--engine and --log-level list what they take, and refuse anything else."""
        _, out, _ = invoke(["run", "--help"], {})
        assert f"{option} {choices}" in out
