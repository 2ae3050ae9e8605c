"""Benchmark the open imposition engine: pages/s and peak RSS per layout kind.

Usage: python scripts/bench_engine.py [--pages 500] [--big 2000] [--runs 3]

Each imposition runs in its own subprocess, so every peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss``) belongs to that imposition alone,
interpreter and pikepdf included. The speed is the median of --runs runs.
Targets (issue): >= 500 pages/s for n-up and step-and-repeat; a 2,000-page
input imposed under 300 MB peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pikepdf  # noqa: E402

MM = 72 / 25.4
#: (preset, page size in points) per layout kind.
CASES = [
    ("nup", "a5-4up-sra3", (148 * MM, 210 * MM)),
    ("step_repeat", "business-cards-sra3", (85 * MM, 55 * MM)),
    ("saddle", "a4-booklet-sra3", (210 * MM, 297 * MM)),
    ("perfect", "a4-perfect-sra3", (210 * MM, 297 * MM)),
]
SPEED_TARGET = {"nup": 500.0, "step_repeat": 500.0}
RSS_TARGET_MB = 300.0


def make_input(path: Path, pages: int, width: float, height: float) -> Path:
    """Write a document whose pages carry text, vector art and one shared image."""
    pdf = pikepdf.new()
    font = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica))
    logo = pdf.make_stream(os.urandom(64 * 64 * 3), Type=pikepdf.Name.XObject,
                           Subtype=pikepdf.Name.Image, Width=64, Height=64,
                           ColorSpace=pikepdf.Name.DeviceRGB, BitsPerComponent=8)
    resources = pdf.make_indirect(pikepdf.Dictionary(
        Font=pikepdf.Dictionary(F1=font), XObject=pikepdf.Dictionary(Im0=logo)))
    for n in range(1, pages + 1):
        ops = [f"0.1 0.3 0.6 rg 0 0 {width:.2f} {height:.2f} re f",
               f"q 40 0 0 40 10 {height - 50:.2f} cm /Im0 Do Q",
               f"BT 0 g /F1 18 Tf 20 {height / 2:.2f} Td (Page {n}) Tj ET"]
        ops += [f"BT /F1 6 Tf 20 {20 + 8 * i} Td (Line {i} of page {n}: the quick brown "
                f"fox jumps over the lazy dog) Tj ET" for i in range(20)]
        ops += [f"{5 + 3 * i} {5 + 2 * i} 30 20 re S" for i in range(20)]
        page = pikepdf.Dictionary(Type=pikepdf.Name.Page, MediaBox=[0, 0, width, height],
                                  Resources=resources,
                                  Contents=pdf.make_stream("\n".join(ops).encode()))
        pdf.pages.append(pikepdf.Page(page))
    pdf.save(path, compress_streams=True)
    return path


def child(layout: str, in_path: str, out_path: str) -> None:
    """Impose once and print the figures as JSON (runs in the measured subprocess)."""
    from imposer.engine import impose, load_layout

    summary = impose(load_layout(layout), in_path, out_path)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"pages": summary.input_pages, "placed": summary.pages_placed,
                      "sheets": summary.sheets, "seconds": summary.seconds,
                      "peak_mb": peak_kb / 1024, "out_bytes": Path(out_path).stat().st_size}))


def measure(layout: str, in_path: Path, out_path: Path) -> dict:
    """Run one imposition in a fresh interpreter and return its figures."""
    done = subprocess.run([sys.executable, __file__, "--child", layout, str(in_path),
                           str(out_path)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def row(kind: str, layout: str, runs: list[dict], rss_target: float | None) -> str:
    """Format one result line with measured figures beside their targets."""
    best = runs[0]
    rate = statistics.median(r["pages"] / r["seconds"] for r in runs)
    peak = max(r["peak_mb"] for r in runs)
    speed_target = SPEED_TARGET.get(kind)
    speed_ok = "-" if speed_target is None else ("ok" if rate >= speed_target else "MISS")
    rss_ok = "-" if rss_target is None else ("ok" if peak < rss_target else "MISS")
    return (f"{kind:<12} {layout:<20} {best['pages']:>6} {best['sheets']:>6} "
            f"{statistics.median(r['seconds'] for r in runs):>8.3f} {rate:>9.0f} "
            f"{'>= %.0f' % speed_target if speed_target else '':>8} {speed_ok:>4} "
            f"{peak:>8.1f} {'< %.0f' % rss_target if rss_target else '':>7} {rss_ok:>4} "
            f"{best['out_bytes'] / 1e6:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--big", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    print(f"imposer engine benchmark: pikepdf {pikepdf.__version__}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs")
    header = (f"{'kind':<12} {'layout':<20} {'pages':>6} {'sheets':>6} {'seconds':>8} "
              f"{'pages/s':>9} {'target':>8} {'':>4} {'peak MB':>8} {'target':>7} {'':>4} "
              f"{'out MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for title, pages, runs, rss_target in (
                (f"{args.pages}-page documents", args.pages, args.runs, None),
                (f"{args.big}-page documents", args.big, 1, RSS_TARGET_MB)):
            print(f"\n{title}\n{header}")
            for kind, layout, size in CASES:
                src = make_input(Path(tmp) / f"{kind}-{pages}.pdf", pages, *size)
                results = [measure(layout, src, Path(tmp) / "out.pdf") for _ in range(runs)]
                print(row(kind, layout, results, rss_target), flush=True)


if __name__ == "__main__":
    main()
