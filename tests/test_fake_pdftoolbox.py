"""The fake pdfToolbox behaves like the real CLI, so the wrapper's tests mean something."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pikepdf
import psutil
import pytest

from tests.fixtures.pdfs import numbered_pdf

FAKE = Path(__file__).parents[1] / "scripts" / "fake-pdftoolbox"


@pytest.fixture
def pdf(tmp_path):
    """Return a real 2-page input PDF."""
    return numbered_pdf(tmp_path / "in.pdf", 2)


def fake(*args, env=None, **kwargs) -> subprocess.CompletedProcess:
    """Run the fake the way the wrapper does, with a clean FAKE_* environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_PDFTOOLBOX_")}
    return subprocess.run([str(FAKE), *map(str, args)], env={**base, **(env or {})},
                          capture_output=True, text=True, **kwargs)


class TestCli:
    def test_copies_input(self, pdf, tmp_path):
        """A normal call writes a real PDF with the same pages and logs like the tool."""
        done = fake("p.kfpx", pdf, f"-o={tmp_path / 'out.pdf'}", "--setvariable=cols:2")
        assert done.returncode == 0
        assert "Profile\tp.kfpx" in done.stdout and "Result\tSuccess" in done.stdout
        with pikepdf.open(tmp_path / "out.pdf") as out:
            assert len(out.pages) == 2

    def test_unknown_flags(self, pdf, tmp_path):
        """Unknown --flag=value options, like licence-server ones, are accepted."""
        done = fake("--licenseserver=h:1", "p", pdf, "--timeout=30", f"-o={tmp_path / 'o.pdf'}")
        assert done.returncode == 0 and (tmp_path / "o.pdf").exists()

    def test_standard_library_only(self, pdf, tmp_path):
        """The fake runs under a bare python3 with site-packages switched off."""
        done = subprocess.run([sys.executable, "-S", "-I", str(FAKE), "p", str(pdf),
                               f"-o={tmp_path / 'o.pdf'}"], capture_output=True)
        assert done.returncode == 0

    def test_empty_profile(self, pdf, tmp_path):
        """An empty profile is a bad call: exit 101."""
        assert fake("", pdf, f"-o={tmp_path / 'o.pdf'}").returncode == 101

    @pytest.mark.parametrize("content", [b"hello", None])
    def test_not_a_pdf(self, tmp_path, content):
        """A missing input or one not starting with %PDF- exits 105 and writes nothing."""
        path = tmp_path / "in.pdf"
        if content is not None:
            path.write_bytes(content)
        done = fake("p", path, f"-o={tmp_path / 'o.pdf'}")
        assert done.returncode == 105 and "input not a PDF" in done.stderr
        assert not (tmp_path / "o.pdf").exists()


class TestBehaviours:
    def test_exit_code(self, pdf, tmp_path):
        """fake_exit of 100 or more exits with it and writes no output."""
        done = fake("p", pdf, f"-o={tmp_path / 'o.pdf'}", "--setvariable=fake_exit:100")
        assert done.returncode == 100 and "licence" in done.stderr
        assert not (tmp_path / "o.pdf").exists()

    def test_exit_code_with_hits(self, pdf, tmp_path):
        """fake_exit below 100 still writes the output, like a run with preflight hits."""
        done = fake("p", pdf, f"-o={tmp_path / 'o.pdf'}", "--setvariable=fake_exit:42")
        assert done.returncode == 42 and (tmp_path / "o.pdf").exists()

    def test_env_default(self, pdf, tmp_path):
        """FAKE_PDFTOOLBOX_EXIT sets the whole run's behaviour."""
        done = fake("p", pdf, f"-o={tmp_path / 'o.pdf'}", env={"FAKE_PDFTOOLBOX_EXIT": "104"})
        assert done.returncode == 104

    def test_variable_beats_env(self, pdf, tmp_path):
        """A job's variable wins over the environment default."""
        done = fake("p", pdf, f"-o={tmp_path / 'o.pdf'}", "--setvariable=fake_exit:0",
                    env={"FAKE_PDFTOOLBOX_EXIT": "104"})
        assert done.returncode == 0

    @pytest.mark.parametrize("how, signum", [("1", signal.SIGSEGV), ("KILL", signal.SIGKILL)])
    def test_crash(self, pdf, tmp_path, how, signum):
        """fake_crash dies by a real signal."""
        done = fake("p", pdf, f"-o={tmp_path / 'o.pdf'}", f"--setvariable=fake_crash:{how}")
        assert done.returncode == -signum

    def test_sleep(self, pdf, tmp_path):
        """FAKE_PDFTOOLBOX_SLEEP delays the end of the run."""
        started = time.monotonic()
        fake("p", pdf, f"-o={tmp_path / 'o.pdf'}", env={"FAKE_PDFTOOLBOX_SLEEP": "0.3"})
        assert time.monotonic() - started >= 0.3

    def test_hang(self, pdf, tmp_path):
        """fake_hang never finishes on its own."""
        with pytest.raises(subprocess.TimeoutExpired):
            fake("p", pdf, f"-o={tmp_path / 'o.pdf'}", "--setvariable=fake_hang:1", timeout=0.5)

    def test_spawn(self, pdf, tmp_path):
        """fake_spawn leaves a grandchild in its own session that outlives the tool."""
        pidfile = tmp_path / "helper.pid"
        env = {"FAKE_PDFTOOLBOX_SPAWN": "1", "FAKE_PDFTOOLBOX_SPAWN_PIDFILE": str(pidfile)}
        done = fake("p", pdf, f"-o={tmp_path / 'o.pdf'}", env=env)
        helper = psutil.Process(int(pidfile.read_text()))
        try:
            assert done.returncode == 0
            assert helper.is_running() and helper.status() != psutil.STATUS_ZOMBIE
            assert os.getsid(helper.pid) == helper.pid
        finally:
            helper.kill()

    def test_memory(self, pdf, tmp_path):
        """fake_memory_mb makes the process resident by that much while it sleeps."""
        proc = subprocess.Popen([str(FAKE), "p", str(pdf), f"-o={tmp_path / 'o.pdf'}",
                                 "--setvariable=fake_memory_mb:80", "--setvariable=fake_hang:1"],
                                stdout=subprocess.DEVNULL)
        try:
            watched, deadline = psutil.Process(proc.pid), time.monotonic() + 10
            while watched.memory_info().rss < 80 * 1024 * 1024:
                assert time.monotonic() < deadline, "never reached 80 MB resident"
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait()


class TestCallsLog:
    def test_one_line_per_call(self, pdf, tmp_path):
        """FAKE_PDFTOOLBOX_CALLS gets a JSON line per run with pid, profile, input, variables."""
        calls = tmp_path / "calls.jsonl"
        env = {"FAKE_PDFTOOLBOX_CALLS": str(calls)}
        fake("a.kfpx", pdf, f"-o={tmp_path / 'o.pdf'}", "--setvariable=k:v", env=env)
        fake("b.kfpx", pdf, f"-o={tmp_path / 'o.pdf'}", "--setvariable=fake_exit:101", env=env)
        lines = [json.loads(line) for line in calls.read_text().splitlines()]
        assert [line["profile"] for line in lines] == ["a.kfpx", "b.kfpx"]
        assert lines[0]["input"] == str(pdf) and lines[0]["variables"] == {"k": "v"}
        assert all(isinstance(line["pid"], int) for line in lines)
