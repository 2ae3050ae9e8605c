"""Each problem the chaos suite found stays fixed: its minimal reproduction no longer reproduces.

``python -m tests.chaos.repros NAME`` runs one by hand and keeps its logs.
Here each runs the same way, in its own process with its own local stack
(a repro points the process's AWS endpoint at its stack), and must exit 0:
nothing found.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.chaos import repros
from tests.fixtures.chaos.cluster import ROOT

FIXED = tuple(sorted(repros.REPROS))

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", FIXED)
def test_the_reproduction_finds_nothing(name):
    """The repro's docstring says what used to happen; it must not any more."""
    got = subprocess.run([sys.executable, "-m", "tests.chaos.repros", name], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, f"{name} reproduced again:\n{got.stdout[-3000:]}"
