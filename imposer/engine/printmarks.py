"""Registration targets, the colour bar and the slug line, in the band beyond the crop marks.

The outer band starts ``offset`` beyond the crop marks (beyond the bleed when
there are none) and is ``length`` deep. Registration targets sit at its four
corners, centred diagonally off each corner of the block; the colour bar runs
along the bottom, centred under the block, as many ``length``-wide patches as
the block's width holds; the slug line runs along the top from the block's
left edge, clipped to the block's width. All of it is outside the trim and
the bleed, so nothing of it survives the guillotine. Marks are drawn in the
output intent's process colour space (CMYK without an intent), registration
in the /All separation, and the slug's font is embedded, so a PDF/A or PDF/X
plate keeps its claim (see :mod:`imposer.engine.standards`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pikepdf

from imposer.engine.geometry import Rect, Side
from imposer.engine.layout import Marks
from imposer.engine.marks import fold_lines, mark_lines, num

#: Colour bar patches, left to right, as CMYK tints: solids, 50% tints, overprints.
PATCHES = ((1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1),
           (.5, 0, 0, 0), (0, .5, 0, 0), (0, 0, .5, 0), (0, 0, 0, .5),
           (0, 1, 1, 0), (1, 0, 1, 0), (1, 1, 0, 0))
#: The colour bar in each process colour space the output intent may name: its fill
#: operator and patches (an RGB or grey intent gets its own primaries or a grey scale).
BARS = {"/DeviceCMYK": ("k", PATCHES),
        "/DeviceRGB": ("rg", ((1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 0), (1, .5, .5),
                              (.5, 1, .5), (.5, .5, 1), (.5, .5, .5), (0, 1, 1), (1, 0, 1),
                              (1, 1, 0))),
        "/DeviceGray": ("g", tuple((i / 10,) for i in range(11)))}
#: The slug's text colour, black in each process colour space.
BLACK = {"/DeviceCMYK": "0 0 0 1 k", "/DeviceRGB": "0 0 0 rg", "/DeviceGray": "0 g"}
#: The embedded slug font (scripts/make_slug_font.py): DejaVu Sans Mono, printable ASCII.
SLUG_FONT = Path(__file__).parent / "fonts" / "DejaVuSansMono-ASCII.ttf"
#: Its metrics, in thousandths of the type size (printed by scripts/make_slug_font.py).
SLUG_METRICS = {"advance": 602.0508, "bbox": [0, -236, 602, 800], "ascent": 928,
                "descent": -236, "cap_height": 729}
#: Bezier handle length for a quarter circle of radius 1.
_KAPPA = 4 * (math.sqrt(2) - 1) / 3
_UNSAFE = re.compile(r"[^\x20-\x7e]")


def band(side: Side, marks: Marks, bleed: float) -> float:
    """Return the distance from the trim box to the inner edge of the outer band."""
    return bleed + (marks.offset + marks.length if marks.crop else 0.0) + marks.offset


def targets(side: Side, marks: Marks, bleed: float) -> list[tuple[float, float]]:
    """Return the centres of the four registration targets."""
    box, q = side.trim_box, band(side, marks, bleed) + marks.length / 2
    return [(x, y) for y in (box.y0 - q, box.y1 + q) for x in (box.x0 - q, box.x1 + q)]


def colour_bar(side: Side, marks: Marks, bleed: float) -> list[Rect]:
    """Return the colour bar's patches, left to right."""
    box, size = side.trim_box, marks.length
    count = min(len(PATCHES), math.floor(box.width / size + 1e-9))
    x0 = (box.x0 + box.x1) / 2 - count * size / 2
    y1 = box.y0 - band(side, marks, bleed)
    return [Rect(x0=x0 + i * size, y0=y1 - size, x1=x0 + (i + 1) * size, y1=y1)
            for i in range(count)]


def slug_area(side: Side, marks: Marks, bleed: float) -> Rect:
    """Return the rectangle the slug line is clipped to."""
    box = side.trim_box
    y0 = box.y1 + band(side, marks, bleed)
    return Rect(x0=box.x0, y0=y0, x1=box.x1, y1=y0 + marks.length)


def slug_font_size(marks: Marks) -> float:
    """Return the slug's type size: 6 pt, smaller when the band is shallow."""
    return min(6.0, 0.8 * marks.length)


def target_ops(side: Side, marks: Marks, bleed: float) -> list[str]:
    """Draw each target: a circle of a third of ``length`` radius and a cross through it."""
    ops, half, r = [], marks.length / 2, marks.length / 3
    k = r * _KAPPA
    for x, y in targets(side, marks, bleed):
        ops.append(f"{num(x - half)} {num(y)} m {num(x + half)} {num(y)} l "
                   f"{num(x)} {num(y - half)} m {num(x)} {num(y + half)} l S")
        ops.append(f"{num(x + r)} {num(y)} m "
                   f"{num(x + r)} {num(y + k)} {num(x + k)} {num(y + r)} {num(x)} {num(y + r)} c "
                   f"{num(x - k)} {num(y + r)} {num(x - r)} {num(y + k)} {num(x - r)} {num(y)} c "
                   f"{num(x - r)} {num(y - k)} {num(x - k)} {num(y - r)} {num(x)} {num(y - r)} c "
                   f"{num(x + k)} {num(y - r)} {num(x + r)} {num(y - k)} {num(x + r)} {num(y)} c "
                   "S")
    return ops


def bar_ops(side: Side, marks: Marks, bleed: float, process: str) -> list[str]:
    """Fill each colour bar patch with its tint in the process colour space."""
    op, patches = BARS[process]
    return [f"{' '.join(num(v) for v in tint)} {op} {num(p.x0)} {num(p.y0)} {num(p.width)} "
            f"{num(p.height)} re f" for tint, p in zip(patches, colour_bar(side, marks, bleed))]


def slug_ops(side: Side, marks: Marks, bleed: float, text: str,
             process: str = "/DeviceCMYK") -> str:
    """Return the slug line as content-stream operators, using font /Slug."""
    area, size = slug_area(side, marks, bleed), slug_font_size(marks)
    baseline = area.y0 + (area.height - 0.7 * size) / 2
    safe = _UNSAFE.sub("?", text).replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return (f"q {num(area.x0)} {num(area.y0)} {num(area.width)} {num(area.height)} re W n "
            f"BT /Slug {num(size)} Tf {BLACK[process]} {num(area.x0)} {num(baseline)} Td "
            f"({safe}) Tj ET Q")


def marks_form(pdf: pikepdf.Pdf, side: Side, marks: Marks, bleed: float,
               width: float, height: float, colour: pikepdf.Object,
               process: str = "/DeviceCMYK") -> pikepdf.Stream:
    """Return a form XObject with one side's marks (all but the slug), shared by every sheet."""
    ops = [f"q {num(marks.line_width)} w 0 J /Reg CS 1 SCN"]
    if marks.crop:
        ops += [f"{num(a)} {num(b)} m {num(c)} {num(d)} l S"
                for a, b, c, d in mark_lines(side, marks, bleed)]
    if marks.registration:
        ops += target_ops(side, marks, bleed)
    if marks.colour_bar:
        ops += bar_ops(side, marks, bleed, process)
    folds = fold_lines(side, marks, bleed) if marks.crop else []
    if folds:
        ops.append("[3 2] 0 d")
        ops += [f"{num(a)} {num(b)} m {num(c)} {num(d)} l S" for a, b, c, d in folds]
    ops.append("Q")
    form = pdf.make_stream("\n".join(ops).encode())
    form.Type, form.Subtype = pikepdf.Name.XObject, pikepdf.Name.Form
    form.BBox = [0, 0, width, height]
    form.Resources = pikepdf.Dictionary(ColorSpace=pikepdf.Dictionary(Reg=colour))
    return form


def slug_font(pdf: pikepdf.Pdf) -> pikepdf.Object:
    """Return the slug line's font, embedded: PDF/A and PDF/X want every font in the file."""
    m = SLUG_METRICS
    data = SLUG_FONT.read_bytes()
    program = pdf.make_stream(data, Length1=len(data))
    descriptor = pikepdf.Dictionary(
        Type=pikepdf.Name.FontDescriptor, FontName=pikepdf.Name.DejaVuSansMono,
        Flags=33,  # fixed pitch, non-symbolic (its glyphs are named by WinAnsiEncoding)
        FontBBox=m["bbox"], ItalicAngle=0, Ascent=m["ascent"], Descent=m["descent"],
        CapHeight=m["cap_height"], StemV=80, FontFile2=program)
    return pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.TrueType,
        BaseFont=pikepdf.Name.DejaVuSansMono, FirstChar=32, LastChar=126,
        Widths=[m["advance"]] * 95, Encoding=pikepdf.Name.WinAnsiEncoding,
        FontDescriptor=pdf.make_indirect(descriptor)))
