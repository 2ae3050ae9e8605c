"""The open engine imposes under a memory ceiling, and only while it imposes.

Run in a fresh subprocess (the ceiling is process-wide): a small imposition
first, so every library is loaded, then a large one under a ceiling that
leaves it 20 MB, then the small one again with the ceiling lifted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pikepdf

CHILD = r"""
import json, resource, sys
import psutil
from imposer.child.ceiling import ceiling
from imposer.engine import impose

big, small, out, headroom = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
before = resource.getrlimit(resource.RLIMIT_AS)
impose("a5-4up-sra3", small, out)  # every library loaded, as in a pool child
got = {}
vms = psutil.Process().memory_info().vms / 2**20
try:
    with ceiling(vms + headroom):
        impose("a5-4up-sra3", big, out)
    got["big"] = "succeeded"
except Exception as exc:
    got["big"] = [type(exc).__name__, str(exc)]
got["restored"] = resource.getrlimit(resource.RLIMIT_AS) == before
impose("a5-4up-sra3", small, out)
got["small"] = "succeeded"
print(json.dumps(got))
"""


def pdf_of(path, pages: int):
    pdf = pikepdf.new()
    for _ in range(pages):
        pdf.add_blank_page(page_size=(419.53, 595.28))
        pdf.pages[-1].Contents = pdf.make_stream(b"0 0 1 rg 10 10 100 100 re f" * 20)
    pdf.save(path)
    return path


class TestMemoryCeiling:
    def test_over_the_ceiling_is_too_large_and_the_next_imposition_runs(self, tmp_path):
        """Within the page budget but over the slot's memory: TooLarge; then the limit is lifted."""
        big = pdf_of(tmp_path / "big.pdf", 4000)
        small = pdf_of(tmp_path / "small.pdf", 4)
        got = subprocess.run([sys.executable, "-c", CHILD, str(big), str(small),
                              str(tmp_path / "out.pdf"), "20"],
                             capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, MALLOC_ARENA_MAX="2"))
        assert got.returncode == 0, got.stderr[-2000:]
        result = json.loads(got.stdout.strip().splitlines()[-1])
        assert result["big"] == ["TooLarge", "the imposition ran out of memory"], result
        assert result["restored"] and result["small"] == "succeeded"
        with pikepdf.open(tmp_path / "out.pdf") as plate:
            assert len(plate.pages) == 1
