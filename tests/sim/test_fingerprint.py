"""``scripts/sim_fingerprint.py``: one hash of many simulated schedules, to compare checkouts."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "sim_fingerprint.py"


def load():
    spec = importlib.util.spec_from_file_location("sim_fingerprint", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestFingerprint:
    def test_the_same_schedules_hash_the_same_and_a_moved_one_does_not(self):
        """Deterministic (the simulator is seeded), and one job more moves the hash."""
        fp = load().fingerprint
        runs, once = fp(["one=6@0"])
        assert runs == 64 and re.fullmatch(r"[0-9a-f]{64}", once)
        assert fp(["one=6@0"]) == (64, once)
        assert fp(["one=7@0"])[1] != once

    def test_each_run_gets_a_line_naming_its_workload_and_policy(self, capsys):
        lines = []
        load().fingerprint(["one=3@0"], lines.append)
        assert len(lines) == 64 and all("one=3@0" in line and "Policy(" in line
                                        for line in lines)
