"""Benchmark the open imposition engine on realistic input: pages/s and peak RSS.

Usage: python scripts/bench_engine.py [--sizes 16 200 2000] [--runs 3]

The input is built to look like a real print job, not a best case: every page
has its own resource dictionary, its own two fonts (one with an embedded font
program), its own image (incompressible pixels), text and vector art; page
boxes are mixed (TrimBox and BleedBox with 3 mm bleed on three pages in four,
a CropBox on some, a bare MediaBox without bleed on every fourth, which the
engine reports as a warning); pages are rotated (/Rotate 90,
180, 270 among them, where the layout can turn them back) and every 50th page
carries a stamp annotation that is flattened.

Each imposition runs in its own subprocess, so its peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss``) is that imposition's alone, interpreter
and pikepdf included. "impose pages/s" counts ``impose()`` alone; "process
pages/s" counts the whole subprocess (start-up, imports, writing). Targets
(issue 18): >= 500 pages/s and < 250 MB peak RSS at 2,000 pages.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pikepdf  # noqa: E402
from pikepdf import Dictionary, Name  # noqa: E402

MM = 72 / 25.4
#: (kind, preset, trim size in points, rotations the layout accepts).
CASES = [
    ("nup", "a5-4up-sra3", (148 * MM, 210 * MM), (0, 90, 180, 270)),
    ("step_repeat", "business-cards-sra3", (85 * MM, 55 * MM), (0, 90, 180, 270)),
    ("saddle", "a4-booklet-sra3", (210 * MM, 297 * MM), (0, 180)),
    ("perfect", "a4-perfect-sra3", (210 * MM, 297 * MM), (0, 180)),
]
SPEED_TARGET = 500.0
RSS_TARGET_MB = 250.0
BLEED = 3 * MM


def make_input(path: Path, pages: int, width: float, height: float,
               rotations: tuple[int, ...]) -> Path:
    """Write a print-like document: distinct resources, fonts and an image on every page."""
    rng = random.Random(pages)
    pdf = pikepdf.new()
    for n in range(1, pages + 1):
        rotate = rotations[n % len(rotations)] if n % 3 == 0 else 0
        w, h = (height, width) if rotate in (90, 270) else (width, height)
        font_program = pdf.make_stream(rng.randbytes(6000))
        fonts = Dictionary(
            F1=pdf.make_indirect(Dictionary(Type=Name.Font, Subtype=Name.Type1,
                                            BaseFont=Name.Helvetica)),
            F2=pdf.make_indirect(Dictionary(
                Type=Name.Font, Subtype=Name.TrueType, BaseFont=Name(f"/Sub{n}+Serif"),
                FontDescriptor=pdf.make_indirect(Dictionary(
                    Type=Name.FontDescriptor, FontName=Name(f"/Sub{n}+Serif"), Flags=32,
                    FontBBox=[0, -200, 1000, 900], ItalicAngle=0, Ascent=900, Descent=-200,
                    CapHeight=700, StemV=80, FontFile2=font_program)))))
        image = pdf.make_stream(rng.randbytes(96 * 64 * 3), Type=Name.XObject,
                                Subtype=Name.Image, Width=96, Height=64,
                                ColorSpace=Name.DeviceRGB, BitsPerComponent=8)
        ops = [f"0.1 0.3 0.6 rg 0 0 {w + 2 * BLEED:.2f} {h + 2 * BLEED:.2f} re f",
               f"q 90 0 0 60 {BLEED + 10:.2f} {h - 60:.2f} cm /Im{n} Do Q",
               f"BT 0 g /F1 18 Tf {BLEED + 20:.2f} {h / 2:.2f} Td (Page {n}) Tj ET"]
        ops += [f"BT /F2 6 Tf {BLEED + 20:.2f} {BLEED + 20 + 8 * i} Td (Line {i} of page {n}: "
                f"the quick brown fox jumps over the lazy dog) Tj ET" for i in range(20)]
        ops += [f"{5 + 3 * i} {5 + 2 * i} 30 20 re S" for i in range(20)]
        media = [0, 0, w + 2 * BLEED, h + 2 * BLEED] if n % 4 else \
            [BLEED, BLEED, w + BLEED, h + BLEED]  # every 4th page: bare MediaBox, no bleed
        page = Dictionary(Type=Name.Page, MediaBox=media, Rotate=rotate,
                          Resources=Dictionary(Font=fonts, XObject=Dictionary(
                              {f"/Im{n}": image})),
                          Contents=pdf.make_stream("\n".join(ops).encode()))
        if n % 4:  # most pages: trim and bleed boxes, delivered with 3 mm bleed
            page.TrimBox = [BLEED, BLEED, w + BLEED, h + BLEED]
            page.BleedBox = media
        if n % 7 == 0:
            page.CropBox = media
        pdf.pages.append(pikepdf.Page(page))
        if n % 50 == 0:
            ap = pdf.make_stream(b"1 0 0 rg 0 0 40 20 re f", Type=Name.XObject,
                                 Subtype=Name.Form, BBox=[0, 0, 40, 20])
            pdf.pages[-1].obj.Annots = [pdf.make_indirect(Dictionary(
                Type=Name.Annot, Subtype=Name.Stamp, Rect=[30, 30, 70, 50], F=4,
                AP=Dictionary(N=ap)))]
    pdf.save(path, compress_streams=True)
    return path


def child(layout: str, in_path: str, out_path: str) -> None:
    """Impose once and print the figures as JSON (runs in the measured subprocess)."""
    from imposer.engine import impose, load_layout

    summary = impose(load_layout(layout), in_path, out_path,
                     slug_fields={"job_id": "bench", "tenant_id": "bench"})
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"pages": summary.input_pages, "placed": summary.pages_placed,
                      "sheets": summary.sheets, "seconds": summary.seconds,
                      "warnings": len(summary.warnings), "peak_mb": peak_kb / 1024,
                      "out_bytes": Path(out_path).stat().st_size}))


def measure(layout: str, in_path: Path, out_path: Path) -> dict:
    """Run one imposition in a fresh interpreter and return its figures."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, __file__, "--child", layout, str(in_path),
                           str(out_path)], capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout)
    figures["process_seconds"] = time.monotonic() - started
    return figures


def row(kind: str, layout: str, runs: list[dict], in_bytes: int) -> str:
    """Format one result line: medians, peak, and each figure's ratio to its target."""
    first = runs[0]
    rate = statistics.median(r["pages"] / r["seconds"] for r in runs)
    process = statistics.median(r["pages"] / r["process_seconds"] for r in runs)
    peak = max(r["peak_mb"] for r in runs)
    return (f"{kind:<12} {layout:<20} {first['pages']:>6} {in_bytes / 1e6:>7.1f} "
            f"{first['sheets']:>6} {rate:>8.0f} {rate / SPEED_TARGET:>5.2f}x "
            f"{process:>8.0f} {process / SPEED_TARGET:>5.2f}x {peak:>8.1f} "
            f"{peak / RSS_TARGET_MB:>5.2f}x {first['out_bytes'] / 1e6:>7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 200, 2000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    print(f"imposer engine benchmark: pikepdf {pikepdf.__version__}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs; targets "
          f">= {SPEED_TARGET:.0f} pages/s, < {RSS_TARGET_MB:.0f} MB peak RSS (ratio = "
          "measured / target: speed wants >= 1, memory wants < 1)")
    header = (f"{'kind':<12} {'layout':<20} {'pages':>6} {'in MB':>7} {'sheets':>6} "
              f"{'impose/s':>8} {'ratio':>6} {'proc/s':>8} {'ratio':>6} {'peak MB':>8} "
              f"{'ratio':>6} {'out MB':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for pages in args.sizes:
            print(f"\n{pages}-page documents (median of {args.runs} runs)\n{header}")
            for kind, layout, size, rotations in CASES:
                src = make_input(Path(tmp) / f"{kind}-{pages}.pdf", pages, *size, rotations)
                results = [measure(layout, src, Path(tmp) / "out.pdf")
                           for _ in range(args.runs)]
                print(row(kind, layout, results, src.stat().st_size), flush=True)


if __name__ == "__main__":
    main()
