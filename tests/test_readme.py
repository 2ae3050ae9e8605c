"""The command examples of README and docs/ that show their output are run, and the
output compared.

An example is a ``$ imposer ...`` line in a literal block followed by what it
prints. ``...`` in a page elides: a line that is only ``...`` skips any lines,
a line ending in ``...`` need only start the printed line. Timings (``in
0.01 s``) are not compared.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from imposer.dev.samples import A5, numbered_pdf

ROOT = Path(__file__).resolve().parents[1]
#: README and every page under docs/: where examples are collected from.
PAGES = [ROOT / "README.rst", *sorted((ROOT / "docs").glob("*.rst"))]
PROMPT = re.compile(r"^(\s*)\$ (imposer .*)$")
#: Examples that stand for a live system (a job id, a running fleet): shown, not run.
ILLUSTRATIVE = {"imposer why 3f2c..."}
TIMING = re.compile(r"in \d+\.\d+ s\b")


def examples() -> list[tuple[str, list[str]]]:
    """Every (command, printed lines) README and the docs pages show."""
    return [example for page in PAGES for example in examples_in(page.read_text())]


def examples_in(text: str) -> list[tuple[str, list[str]]]:
    """Every (command, printed lines) *text* shows."""
    lines = text.splitlines()
    found = []
    for n, line in enumerate(lines):
        match = PROMPT.match(line)
        if not match:
            continue
        indent, shown = len(match.group(1)), []
        for following in lines[n + 1:]:
            if PROMPT.match(following) or (following.strip() and
                                          len(following) - len(following.lstrip()) < indent):
                break
            shown.append(following[indent:].rstrip())
        while shown and not shown[-1]:
            shown.pop()
        found.append((match.group(2), shown))
    return found


def same(shown: list[str], printed: list[str]) -> str | None:
    """Say where *printed* departs from the *shown* lines of a page, or None if it does not."""
    printed = [TIMING.sub("in N s", p.rstrip()) for p in printed]
    at, skipping = 0, False
    for want in (TIMING.sub("in N s", w) for w in shown):
        if want.strip() == "...":
            skipping = True
            continue
        prefix = want[:-3].rstrip() if want.endswith("...") else None
        while at < len(printed):
            got = printed[at]
            at += 1
            if (got.startswith(prefix) if prefix is not None else got == want):
                break
            if not skipping:
                return f"the page shows {want!r}, the command printed {got!r}"
        else:
            return f"the page shows {want!r}, the command never printed it"
        skipping = False
    return None


class TestReadmeExamples:
    def test_every_example_is_run_or_known_to_be_illustrative(self):
        """A new example with output is picked up by the test below, or listed as illustrative."""
        commands = [command for command, _ in examples()]
        assert set(ILLUSTRATIVE) <= set(commands)
        assert len(commands) >= 4

    def test_examples_are_collected_from_every_page(self):
        """An example moved from README into a docs page is still collected and run."""
        assert len(PAGES) > 1 and all(page.is_file() for page in PAGES)
        commands = {command.split()[1] for command, _ in examples()}
        assert {"layouts", "impose", "simulate", "why"} <= commands

    @pytest.mark.parametrize("command, shown", [e for e in examples()
                                                if e[0] not in ILLUSTRATIVE],
                             ids=lambda value: value if isinstance(value, str) else "")
    def test_example_prints_what_readme_shows(self, tmp_path, command, shown):
        """The command, run as its page shows it with the default settings, prints those lines."""
        numbered_pdf(tmp_path / "in.pdf", 16, *A5)
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMPOSER_")}
        args = shlex.split(command)[1:]
        got = subprocess.run([sys.executable, "-m", "imposer", *args], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert got.returncode == 0, got.stderr
        problem = same(shown, got.stdout.splitlines())
        assert problem is None, f"{command}: {problem}\n--- printed ---\n{got.stdout}"

    def test_the_comparison_can_fail(self):
        """A changed figure, a missing line and a line out of place are each caught."""
        printed = ["a 1", "b 2", "c 3"]
        assert same(["a 1", "...", "c 3"], printed) is None
        assert same(["a 1", "b ..."], printed) is None
        assert same(["a 1", "b 9"], printed) is not None
        assert same(["a 1", "d 4"], printed) is not None
        assert same(["b 2", "a 1"], printed) is not None
