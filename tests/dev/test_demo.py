"""`imposer demo --fast`: the README's first command, run as a new user would."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pikepdf
import pytest

pytestmark = pytest.mark.slow


class TestDemo:
    def test_fast_demo_runs_fair_and_exits_zero(self, tmp_path, redis_server):
        """The demo finishes, caps the noisy tenant at 4 slots and leaves real plate files."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["IMPOSER_REDIS_URL"] = redis_server
        out = tmp_path / "demo"
        proc = subprocess.run([sys.executable, "-m", "imposer", "demo", "--fast", "--out",
                               str(out)], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        text = proc.stdout
        assert "admission control (layer 3) on" in text
        rows = {m.group(1): m.groups() for m in re.finditer(
            r"^  (\S+)\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(\d+)$", text, re.M)}
        assert set(rows) == {"noisy-print-co", "quiet-books", "quiet-cards", "quiet-flyers"}
        for tenant, (_, jobs, done, max_slots, _) in rows.items():
            assert jobs == done and int(jobs) > 0, tenant
            assert int(max_slots) <= 4, tenant
        assert int(rows["noisy-print-co"][3]) == 4
        assert int(rows["noisy-print-co"][4]) > 0, "the noisy tenant was never deferred"
        assert "Refused on purpose by the tenant's admission control (a re-sent job): " \
            "noisy-print-co: token 'reprint-0'" in text
        assert re.search(r"^\[\s*\d+\.\ds\] done$", text, re.M), "the total time, set-up included"
        plates = sorted((out / "plates").rglob("*.pdf"))
        assert len(plates) == sum(int(r[1]) for r in rows.values())
        for tenant in rows:
            (plate, *_) = sorted((out / "plates" / tenant).glob("*.pdf"))
            with pikepdf.open(plate) as pdf:
                assert len(pdf.pages) > 0 and "/TrimBox" in pdf.pages[0]
                marks = pdf.pages[0].Resources.XObject.keys()
                assert any(name != "/P1" and not name.startswith("/P") for name in marks), \
                    f"{tenant}'s plate has no printer's marks"
