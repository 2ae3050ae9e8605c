"""Doctor's checks of the licensed tool: its version, and its licence for this host's slots.

Both are calls of the tool that process no file and change nothing: a
version query and a licence query (``IMPOSER_PDFTOOLBOX_LICENCE_CHECK``),
with the same extra arguments the worker passes (licence-server options
matter to the licence). The tool's exit code means what it means to a job
(``imposer.engine.pdftoolbox``): 100 is no licence available.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator

from imposer.cli.doctor.check import FAIL, OK, SKIP, WARN, Check
from imposer.settings import Settings

#: A query of the tool that takes longer than this is itself a fault worth failing on.
TIMEOUT_SECONDS = 120.0
#: How the licence's parallel processes read in the tool's answer ("Processes 8").
PROCESSES = re.compile(r"process(?:es)?\W{0,10}(\d+)", re.IGNORECASE)


def checks(s: Settings) -> Iterator[Check]:
    """The version and licence checks, once the engine check found the executable."""
    path = shutil.which(s.pdftoolbox) if s.engine == "pdftoolbox" else None
    if path is None:
        return
    extra = shlex.split(s.pdftoolbox_args)
    ran = _ask("tool version", [path, "--version"])
    if isinstance(ran, Check):
        yield ran
    else:
        yield Check(name="tool version", status=OK,
                    detail=next((line for line in ran.splitlines() if line.strip()), "?"))
    yield licence(s, path, extra)


def licence(s: Settings, path: str, extra: list[str]) -> Check:
    """The licence must be active for at least IMPOSER_SLOTS parallel processes."""
    query = shlex.split(s.pdftoolbox_licence_check)
    if not query:
        return Check(name="licence", status=SKIP,
                     detail="not checked (IMPOSER_PDFTOOLBOX_LICENCE_CHECK is empty)")
    ran = _ask("licence", [path, *extra, *query])
    if isinstance(ran, Check):
        return ran
    found = PROCESSES.search(ran)
    if found is None:
        return Check(name="licence", status=WARN, detail=(
            f"active, but `{shlex.join(query)}` named no number of processes to compare "
            f"with IMPOSER_SLOTS ({s.slots})"))
    processes = int(found.group(1))
    if processes < s.slots:
        return Check(name="licence", status=FAIL, detail=(
            f"active for {processes} parallel process(es); IMPOSER_SLOTS is {s.slots}: "
            "jobs beyond the licence would fail for want of it"))
    return Check(name="licence", status=OK, detail=(
        f"active for {processes} parallel processes (IMPOSER_SLOTS {s.slots})"))


def _ask(name: str, command: list[str]) -> str | Check:
    """The tool's output for *command*, or a failed check saying how the call went wrong."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Check(name=name, status=FAIL,
                     detail=f"`{shlex.join(command)}` did not answer in {TIMEOUT_SECONDS:g} s")
    except OSError as exc:
        return Check(name=name, status=FAIL, detail=f"`{shlex.join(command)}`: {exc}")
    if done.returncode != 0:
        # here, not at the top: the engine brings pikepdf, which operator commands never load
        from imposer.engine.pdftoolbox import classify, describe
        said = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        kind = classify(done.returncode)
        meaning = (kind.__doc__ or "").strip().splitlines()[0] if kind else ""
        return Check(name=name, status=FAIL, detail=(
            f"`{shlex.join(command)}`: {describe(done.returncode)}"
            + (f" ({meaning.rstrip('.')})" if meaning else "") + (f": {said[0]}" if said[0] else "")))
    return done.stdout
