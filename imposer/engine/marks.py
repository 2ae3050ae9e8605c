"""Crop and fold marks, drawn in registration colour around the imposed block.

(:mod:`imposer.engine.printmarks` adds the outer band and builds the marks form.)

Marks extend every cut line of the grid beyond the block's bleed (never
between cells, where they would print over a neighbour's bleed): they start
``offset`` beyond the bleed edge and run ``length`` outwards. A booklet's fold
gets a dashed mark in the same place.
"""

from __future__ import annotations

import pikepdf

from imposer.engine.geometry import Side
from imposer.engine.layout import Marks


def num(value: float) -> str:
    """Format a number for a content stream: four decimals, no trailing zeros."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


#: Process colour space -> (no ink, full ink) in it: the /All separation's tint transform.
_ALL_INKS = {"/DeviceCMYK": ([0, 0, 0, 0], [1, 1, 1, 1]), "/DeviceRGB": ([1, 1, 1], [0, 0, 0]),
             "/DeviceGray": ([1], [0])}


def registration(pdf: pikepdf.Pdf, process: str = "/DeviceCMYK") -> pikepdf.Object:
    """Return the /All separation colour space: ink on every plate, for marks.

    Its alternate is the output intent's process space, so a proof or a PDF/A
    viewer that has no /All plate shows it in a colour the intent allows.
    """
    none, full = _ALL_INKS[process]
    tint = pikepdf.Dictionary(FunctionType=2, Domain=[0, 1], C0=none, C1=full, N=1)
    return pdf.make_indirect(pikepdf.Array(
        [pikepdf.Name.Separation, pikepdf.Name.All, pikepdf.Name(process), tint]))


def mark_lines(side: Side, marks: Marks, bleed: float) -> list[tuple[float, float, float, float]]:
    """Return the cut mark segments (x0, y0, x1, y1) of one sheet side."""
    box = side.trim_box
    reach = bleed + marks.offset
    lines = []
    for x in side.cuts_x:
        lines.append((x, box.y1 + reach, x, box.y1 + reach + marks.length))
        lines.append((x, box.y0 - reach, x, box.y0 - reach - marks.length))
    for y in side.cuts_y:
        lines.append((box.x0 - reach, y, box.x0 - reach - marks.length, y))
        lines.append((box.x1 + reach, y, box.x1 + reach + marks.length, y))
    return lines


def fold_lines(side: Side, marks: Marks, bleed: float) -> list[tuple[float, float, float, float]]:
    """Return the fold mark segments of one sheet side (booklets only)."""
    box, reach = side.trim_box, bleed + marks.offset
    return [seg for x in side.folds_x for seg in (
        (x, box.y1 + reach, x, box.y1 + reach + marks.length),
        (x, box.y0 - reach, x, box.y0 - reach - marks.length))]
