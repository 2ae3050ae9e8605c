"""Run the licensed pdfToolbox CLI inside a pool process and always clean up after it.

The tool is a native binary that may hang, crash, leave helpers behind or eat
memory, and a licence slot is too dear to lose to any of that. So it runs in
its own session, its whole process tree is watched with psutil, and every
process it ever started is killed when it overruns, over-allocates or ends.
Its exit code becomes one of our exceptions, so the job's fate (fail at once,
retry, retry later) follows from the class.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Mapping, Sequence

import attrs
import psutil

from imposer import logs
from imposer.errors import (
    InputPdfError,
    JobError,
    LicenceUnavailable,
    ResourceLimitExceeded,
    ToolConfigError,
    ToolFailed,
    ToolTimeout,
)

logger = logging.getLogger(__name__)

#: Environment variable marking a run, to find leftovers that escaped the tree walk.
COOKIE = "IMPOSER_TOOL_RUN"
#: Environment variable naming the slot that started a tool ("<host>/<boot>/<slot>"), so
#: the parent can kill a dead child's tool and a restarted host its previous run's tools.
OWNER = "IMPOSER_TOOL_OWNER"
_PR_SET_PDEATHSIG = 1
_MB = 1024 * 1024
_TAIL_LINES = 10
#: Exit codes of 100 and up that are not internal failures (ToolFailed covers the rest).
_EXIT_CLASSES: dict[int, type[JobError]] = {
    100: LicenceUnavailable, 101: ToolConfigError, 102: ToolConfigError,
    104: InputPdfError, 105: InputPdfError, 107: InputPdfError,
}


@attrs.frozen(kw_only=True)
class ToolResult:
    """Report one successful run, for the job record and the metrics."""

    #: Exit code; 0-99 all mean success (above 0: the profile had hits).
    returncode: int
    #: Wall-clock duration of the run.
    seconds: float
    #: Highest summed RSS of the tool's process tree seen while polling.
    peak_rss_mb: float
    #: Last lines of the tool's stdout (its log).
    stdout_tail: str
    #: Last lines of the tool's stderr.
    stderr_tail: str


def build_command(executable: str, extra_args: Sequence[str] | str, profile: str,
                  input_path: str | os.PathLike, output_path: str | os.PathLike,
                  variables: Mapping[str, str]) -> list[str]:
    """Spell a pdfToolbox call as an argv, refusing anything the CLI would misread."""
    extra = shlex.split(extra_args) if isinstance(extra_args, str) else [str(a) for a in extra_args]
    for what, text in (("profile", str(profile)), ("input path", str(input_path))):
        if not text or text.startswith("-") or "\0" in text:
            raise ToolConfigError(f"bad pdfToolbox {what} {text!r}")
    settings = []
    for name, value in variables.items():
        name, value = str(name), str(value)
        if not name or ":" in name or "\0" in name or any(c.isspace() for c in name):
            raise ToolConfigError(f"bad pdfToolbox variable name {name!r}")
        if "\0" in value:
            raise ToolConfigError(f"NUL in the value of pdfToolbox variable {name!r}")
        settings.append(f"--setvariable={name}:{value}")
    return [executable, *extra, str(profile), str(input_path), f"-o={output_path}", *settings]


def classify(returncode: int) -> type[JobError] | None:
    """Map an exit code to the exception that decides the job's fate (None: success)."""
    if 0 <= returncode < 100:
        return None
    return _EXIT_CLASSES.get(returncode, ToolFailed)


def describe(returncode: int) -> str:
    """Say how the tool ended, naming the signal when it died by one."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


class _Tree:
    """Remember every process the tool ever started, so that none outlives the job."""

    def __init__(self, popen: subprocess.Popen, cookie: str) -> None:
        self.popen, self.cookie, self.peak_rss = popen, cookie, 0
        self.seen: dict[int, psutil.Process] = {popen.pid: psutil.Process(popen.pid)}

    def sample(self) -> int:
        """Track new descendants, even ones re-parented after setsid(), and sum their RSS."""
        for top in [p for p in self.seen.values() if _ask(p.ppid) not in self.seen]:
            for child in _ask(lambda: top.children(recursive=True), []):
                self.seen.setdefault(child.pid, child)
        rss = sum(_ask(lambda: p.memory_info().rss, 0) for p in self.seen.values())
        self.peak_rss = max(self.peak_rss, rss)
        return rss

    def marked(self) -> list[psutil.Process]:
        """Find processes carrying this run's cookie: helpers detached before any poll saw them."""
        return [p for p in psutil.process_iter()
                if p.pid not in self.seen and _ask(p.environ, {}).get(COOKIE) == self.cookie]

    def kill(self) -> int:
        """SIGKILL the tool's group and every process it started; return how many were alive."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)  # the unreaped leader keeps the pgid ours
        except (ProcessLookupError, PermissionError):
            pass
        others = [p for pid, p in self.seen.items() if pid != self.popen.pid] + self.marked()
        alive = [p for p in others if not _gone(p)]
        for proc in alive:
            _ask(proc.kill)
        self.popen.kill()  # no-op once it has exited; covers a leader that left its group
        stuck = _wait_gone(alive, timeout=5.0)
        if stuck:
            logger.error("pdfToolbox processes survived SIGKILL: %s", [p.pid for p in stuck],
                         extra=logs.extra("tool_kill_failed"))
        return len(alive)


def _ask(call, default=None):
    """Ask psutil about a process that may vanish or be out of reach at any moment."""
    try:
        return call()
    except psutil.Error:
        return default


def _gone(proc: psutil.Process) -> bool:
    """Count a zombie as gone: it holds no resources and its reaper is not us."""
    return not proc.is_running() or _ask(proc.status, psutil.STATUS_ZOMBIE) == psutil.STATUS_ZOMBIE


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    alive = procs
    while alive and time.monotonic() < deadline:
        _, alive = psutil.wait_procs(alive, timeout=0.05)
        alive = [p for p in alive if not _gone(p)]
    return alive


def _exited(pid: int) -> bool:
    """Tell whether the tool ended, without reaping it, so its pgid stays ours to kill."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _tail(path: Path, lines: int = _TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return ""


def _libc_prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_prctl = _libc_prctl()
#: The exit status of a tool whose pool child died before it could exec.
_ORPHANED = 125


def _die_with_parent(parent: int) -> None:
    """In the tool, before exec: be killed when the pool child *parent* that started it dies.

    Linux only, and only the tool itself; helpers it spawns are found through
    the OWNER variable by the parent instead. A pool child killed between the
    fork and the ``prctl`` never sends the signal: the tool, already an orphan,
    sees its parent changed and leaves before exec (the parent's search by OWNER
    cannot see it yet: the variable comes with exec). Resolved at import:
    nothing is imported between fork and exec.
    """
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(_ORPHANED)


def _output_of(command: Sequence[str]) -> Path | None:
    for arg in reversed(command[1:]):
        for flag in ("-o=", "--outputfile="):
            if arg.startswith(flag):
                return Path(arg[len(flag):])
    return None


def run_tool(command: Sequence[str], *, timeout: float, memory_limit_mb: float,
             cwd: str | os.PathLike, env: Mapping[str, str] | None = None,
             poll_interval: float = 0.1, log_path: str | os.PathLike | None = None,
             tenant_id: str | None = None, job_id: str | None = None,
             owner: str | None = None) -> ToolResult:
    """Run the tool to its end or kill it, so that a bad job costs only its own slot.

    *env* replaces the environment when given; *owner* tags the tool's processes
    (``IMPOSER_TOOL_OWNER``) so they can be found if this process dies. The tool's stdout goes to
    *log_path* (default ``cwd/pdftoolbox.log``) and its stderr beside it with
    ``.stderr`` appended: files, never pipes that could fill up and block it.
    Raises the :func:`classify` class of a failing exit code, ToolTimeout,
    ResourceLimitExceeded, or ToolFailed when a success wrote no output.
    """
    extra = functools.partial(logs.extra, tenant_id=tenant_id, job_id=job_id)
    out_path = Path(log_path) if log_path else Path(cwd) / "pdftoolbox.log"
    err_path = out_path.with_name(out_path.name + ".stderr")
    child_env = {**(os.environ if env is None else env), COOKIE: uuid.uuid4().hex}
    if owner:
        child_env[OWNER] = owner
    started = time.monotonic()
    problem: JobError | None = None
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            popen = subprocess.Popen(list(command), cwd=cwd, env=child_env, stdout=out,
                                     stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=functools.partial(_die_with_parent, os.getpid()))
        except OSError as exc:
            raise ToolConfigError(f"cannot start {command[0]!r}: {exc}") from exc
    tree = _Tree(popen, child_env[COOKIE])
    try:
        while True:
            rss = tree.sample()
            if _exited(popen.pid):
                break
            if rss > memory_limit_mb * _MB:
                problem = ResourceLimitExceeded(
                    f"tool tree RSS {rss / _MB:.0f} MB over the limit of {memory_limit_mb:g} MB")
                break
            remaining = started + timeout - time.monotonic()
            if remaining <= 0:
                problem = ToolTimeout(f"tool still running after {timeout:g} s")
                break
            time.sleep(min(poll_interval, remaining))
    finally:
        leftovers = tree.kill()
        returncode = popen.wait()
    seconds = time.monotonic() - started
    stderr_tail = _tail(err_path)
    said = "; stderr: " + " | ".join(stderr_tail.splitlines()[-3:]) if stderr_tail else ""
    if problem is not None:
        logger.warning("killed pdfToolbox: %s", problem,
                       extra=extra("tool_killed", kind=problem.kind, seconds=seconds))
        raise type(problem)(f"{problem}{said}")
    if leftovers:
        logger.warning("killed %d processes pdfToolbox left behind", leftovers,
                       extra=extra("tool_leftovers_killed"))
    failure = classify(returncode)
    if failure is not None:
        raise failure(f"pdfToolbox {describe(returncode)}{said}")
    output = _output_of(command)
    if output is not None:
        output = output if output.is_absolute() else Path(cwd) / output
        if not output.is_file() or output.stat().st_size == 0:
            raise ToolFailed(f"pdfToolbox {describe(returncode)} but wrote no output at {output}")
    result = ToolResult(returncode=returncode, seconds=seconds, peak_rss_mb=tree.peak_rss / _MB,
                        stdout_tail=_tail(out_path), stderr_tail=stderr_tail)
    logger.info("pdfToolbox finished with %s in %.2f s", describe(returncode), seconds,
                extra=extra("tool_finished", returncode=returncode, seconds=seconds,
                            peak_rss_mb=result.peak_rss_mb))
    return result
