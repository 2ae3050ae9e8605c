"""The pdfToolbox wrapper, driven against real subprocesses of scripts/fake-pdftoolbox."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path

import pikepdf
import psutil
import pytest

from imposer.engine import pdftoolbox as toolbox
from imposer.errors import (
    InputPdfError,
    LicenceUnavailable,
    ResourceLimitExceeded,
    ToolConfigError,
    ToolFailed,
    ToolTimeout,
)
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import FAKE


def dead(pid: int) -> bool:
    """Tell whether *pid* is gone or only a zombie waiting for a reaper that is not us."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def alive_writing(output: Path) -> list[int]:
    """Return the pids of live (not zombie) processes whose argv names *output*."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        if f"-o={output}" in (process.info["cmdline"] or ()) \
                and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process.info["pid"])
    return found


@pytest.fixture
def job(tmp_path, monkeypatch):
    """Return a function running the fake tool on a real 3-page PDF through run_tool."""
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_PDFTOOLBOX_CALLS", str(calls))
    source = numbered_pdf(tmp_path / "in.pdf", 3)
    output = tmp_path / "out.pdf"

    def run(variables=None, timeout=5.0, memory_limit_mb=1024.0, **kwargs):
        command = toolbox.build_command(str(FAKE), [], "impose.kfpx", source, output,
                                        variables or {})
        return toolbox.run_tool(command, timeout=timeout, memory_limit_mb=memory_limit_mb,
                                cwd=tmp_path, poll_interval=0.05, **kwargs)

    run.output = output
    run.pids = lambda: [json.loads(line)["pid"] for line in calls.read_text().splitlines()]
    return run


class TestBuildCommand:
    def test_order(self):
        """The argv is executable, extra args, profile, input, -o=output, then the variables."""
        command = toolbox.build_command("pdfToolbox", ["--licenseserver=ls:1"], "p.kfpx",
                                        Path("/in.pdf"), Path("/out.pdf"),
                                        {"cols": "2", "a": "b:c"})
        assert command == ["pdfToolbox", "--licenseserver=ls:1", "p.kfpx", "/in.pdf",
                           "-o=/out.pdf", "--setvariable=cols:2", "--setvariable=a:b:c"]

    def test_extra_args_string(self):
        """Extra args given as one string are split like a shell would, quotes included."""
        command = toolbox.build_command("t", "--a=1 '--b=x y'", "p", "i.pdf", "o.pdf", {})
        assert command[:3] == ["t", "--a=1", "--b=x y"]

    @pytest.mark.parametrize("name", ["", "a:b", "a b", "tab\tname", "nul\0"])
    def test_bad_variable_name(self, name):
        """A variable name the CLI would misread is refused before anything runs."""
        with pytest.raises(ToolConfigError):
            toolbox.build_command("t", [], "p", "i.pdf", "o.pdf", {name: "1"})

    def test_nul_in_value(self):
        """A NUL byte in a variable's value is refused."""
        with pytest.raises(ToolConfigError):
            toolbox.build_command("t", [], "p", "i.pdf", "o.pdf", {"a": "x\0y"})

    def test_profile_like_a_flag(self):
        """A profile starting with '-' is refused, since the CLI would read it as an option."""
        with pytest.raises(ToolConfigError):
            toolbox.build_command("t", [], "--evil", "i.pdf", "o.pdf", {})


class TestClassify:
    @pytest.mark.parametrize("code, expected", [
        (0, None), (1, None), (42, None), (99, None),
        (100, LicenceUnavailable), (101, ToolConfigError), (102, ToolConfigError),
        (103, ToolFailed), (104, InputPdfError), (105, InputPdfError), (106, ToolFailed),
        (107, InputPdfError), (108, ToolFailed), (255, ToolFailed), (-11, ToolFailed),
    ])
    def test_table(self, code, expected):
        """Each exit code maps to the exception class that decides the job's fate."""
        assert toolbox.classify(code) is expected


class TestRunTool:
    def test_success(self, job):
        """A clean run returns its result and leaves a real PDF with every page."""
        result = job()
        assert result.returncode == 0
        assert result.seconds > 0 and result.peak_rss_mb > 0
        assert "Result\tSuccess" in result.stdout_tail
        with pikepdf.open(job.output) as pdf:
            assert len(pdf.pages) == 3

    def test_success_with_hits(self, job):
        """An exit code below 100 (42 here) is a success, not an error."""
        assert job({"fake_exit": "42"}).returncode == 42
        assert job.output.stat().st_size > 0

    @pytest.mark.parametrize("code, error", [
        (100, LicenceUnavailable), (101, ToolConfigError), (102, ToolConfigError),
        (103, ToolFailed), (104, InputPdfError), (105, InputPdfError), (106, ToolFailed),
        (107, InputPdfError), (150, ToolFailed),
    ])
    def test_exit_codes(self, job, code, error):
        """A failing exit code raises its class, naming the code and the tool's stderr."""
        with pytest.raises(error) as caught:
            job({"fake_exit": str(code)})
        assert f"exit code {code}" in str(caught.value)
        assert "Error" in str(caught.value)

    def test_crash(self, job):
        """A tool killed by a signal is an internal failure naming the signal."""
        with pytest.raises(ToolFailed, match="SIGSEGV"):
            job({"fake_crash": "1"})

    def test_missing_output(self, job):
        """Exit 0 without an output file is an internal failure, not a success."""
        with pytest.raises(ToolFailed, match="no output"):
            job({"fake_no_output": "1"})

    def test_missing_executable(self, tmp_path):
        """A tool that cannot start at all is a configuration error."""
        with pytest.raises(ToolConfigError):
            toolbox.run_tool([str(tmp_path / "nope")], timeout=1, memory_limit_mb=100,
                             cwd=tmp_path)

    def test_hang(self, job, tmp_path):
        """A hanging tool is killed at the timeout and leaves no process behind."""
        calls = tmp_path / "calls.jsonl"
        # the tool records its call once Python has started; on a loaded machine that can
        # take longer than the timeout, so a longer one is tried until it reached its hang
        for timeout in (0.5, 2.0, 8.0, 30.0):
            with pytest.raises(ToolTimeout):
                job({"fake_hang": "1"}, timeout=timeout)
            assert not alive_writing(job.output)  # killed, whether it got to the hang or not
            if calls.exists():
                break
        assert calls.exists(), "the tool never reached its hang before the timeout"
        assert job.pids() and all(dead(pid) for pid in job.pids())

    @pytest.mark.parametrize("variables", [{}, {"fake_sleep": "0.3"}])
    def test_spawned_helper_after_success(self, job, tmp_path, variables):
        """A helper the tool detached with setsid() is killed when the tool ends well."""
        pidfile = tmp_path / "helper.pid"
        job({"fake_spawn": "1", "fake_spawn_pidfile": str(pidfile), **variables})
        assert dead(int(pidfile.read_text()))

    def test_spawned_helper_after_timeout(self, job, tmp_path):
        """A detached helper is killed together with a tool that timed out."""
        pidfile = tmp_path / "helper.pid"
        for timeout in (0.5, 2.0, 8.0):  # a loaded machine may not start the helper in time
            with pytest.raises(ToolTimeout):
                job({"fake_spawn": "1", "fake_spawn_pidfile": str(pidfile), "fake_hang": "1"},
                    timeout=timeout)
            if pidfile.exists():
                break
        assert pidfile.exists(), "the tool never spawned its helper before the timeout"
        assert dead(int(pidfile.read_text()))
        assert all(dead(pid) for pid in job.pids())

    def test_memory_ceiling(self, job):
        """A tree over its memory ceiling is killed and the reason names RSS and limit."""
        with pytest.raises(ResourceLimitExceeded, match="limit of 60 MB") as caught:
            job({"fake_memory_mb": "200", "fake_hang": "1"}, timeout=10, memory_limit_mb=60)
        assert "RSS" in str(caught.value)
        assert all(dead(pid) for pid in job.pids())

    def test_logs_and_capture_files(self, job, tmp_path, caplog):
        """A run logs action tool_finished with the job's ids and captures output in files."""
        with caplog.at_level(logging.INFO, logger="imposer.engine.pdftoolbox"):
            job(log_path=tmp_path / "tool.log", tenant_id="t1", job_id="j1")
        record = next(r for r in caplog.records if r.action == "tool_finished")
        assert (record.tenant_id, record.job_id, record.returncode) == ("t1", "j1", 0)
        assert "Result\tSuccess" in (tmp_path / "tool.log").read_text()
        assert (tmp_path / "tool.log.stderr").exists()

    def test_extra_args_reach_the_tool(self, job, tmp_path):
        """Licence-server style flags pass through and the tool still runs."""
        command = toolbox.build_command(str(FAKE), "--licenseserver=host:4000 --timeout=30",
                                        "p.kfpx", numbered_pdf(tmp_path / "x.pdf", 1),
                                        tmp_path / "y.pdf", {})
        result = toolbox.run_tool(command, timeout=5, memory_limit_mb=1024, cwd=tmp_path)
        assert result.returncode == 0 and (tmp_path / "y.pdf").stat().st_size > 0

    def test_describe_signal(self):
        """A negative return code is described by its signal's name."""
        assert toolbox.describe(-signal.SIGKILL) == "killed by SIGKILL"

    @pytest.mark.skipif(toolbox._prctl is None, reason="PR_SET_PDEATHSIG is Linux's")
    def test_a_tool_whose_pool_child_died_before_exec_never_runs(self, tmp_path):
        """A tool forked by a pool child that died before the death signal was armed (its
        parent is no longer the one that forked it) leaves before exec: no orphan runs
        (the chaos run once found one left to init)."""
        import functools
        import os
        import subprocess

        marker = tmp_path / "ran"
        not_my_parent = os.getpid() + 1_000_000
        proc = subprocess.Popen(["sh", "-c", f"touch {marker}"],
                                preexec_fn=functools.partial(toolbox._die_with_parent,
                                                             not_my_parent))
        assert proc.wait(10) == toolbox._ORPHANED
        assert not marker.exists()
        ok = subprocess.Popen(["sh", "-c", f"touch {marker}"],
                              preexec_fn=functools.partial(toolbox._die_with_parent, os.getpid()))
        assert ok.wait(10) == 0 and marker.exists()
