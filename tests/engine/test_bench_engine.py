"""scripts/bench_engine.py's real-input mode builds the job it claims and the engine imposes it."""

from __future__ import annotations

import runpy
from pathlib import Path

import pikepdf

from imposer.engine import impose, load_layout

BENCH = runpy.run_path(str(Path(__file__).resolve().parents[2] / "scripts" / "bench_engine.py"),
                       run_name="bench_engine")


class TestRealInput:
    def test_corpus_ganged_to_size(self, tmp_path):
        """The corpus (matplotlib's own PDFs and the documents made) is ganged in turn past a
        whole round, its pages, forms and notes come along, and it imposes 2-up."""
        (tmp_path / "made").mkdir()
        files = BENCH["corpus"](tmp_path / "made")  # the script makes them in a temp dir
        assert any("mpl-data" in str(path) for path in files)  # installed ones come first
        assert {"review.pdf", "form.pdf", "pdfa.pdf"} <= {path.name for path in files}
        round_pages = 0
        for path in files:
            with pikepdf.open(path) as pdf:
                round_pages += len(pdf.pages)
        pages = round_pages + 10
        src = BENCH["make_real_input"](tmp_path / "real.pdf", pages, files)
        with pikepdf.open(src) as pdf:
            assert len(pdf.pages) == pages
            sizes = {tuple(round(float(v)) for v in page.mediabox) for page in pdf.pages}
            assert "/AcroForm" in pdf.Root  # the form's fields came along
            assert any(int(page.obj.get("/Rotate", 0)) == 90 for page in pdf.pages)
        # US Letter, A4 and A4 landscape among them
        assert {(0, 0, 612, 792), (0, 0, 595, 842), (0, 0, 842, 595)} <= sizes
        summary = impose(load_layout(BENCH["REAL_LAYOUT"]), src, tmp_path / "out.pdf")
        assert (summary.pages_placed, summary.sheets) == (pages, (pages + 1) // 2)
        assert summary.turned  # the landscape and rotated pages were turned into the cells
        # the review page's note is the one annotation the engine names
        assert sum("(Text)" in warning for warning in summary.warnings) == 1
