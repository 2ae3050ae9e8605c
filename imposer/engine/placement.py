"""How each page lands in its cell: turned to fit, scaled, centred, clipped to its bleed.

A page is placed as a viewer shows it (its /Rotate applied), turned a further 90
degrees anticlockwise when ``rotate_to_fit`` is on and its orientation differs
from the cell's, turned 180 degrees in a work-and-tumble back's cells, scaled
by ``fit``, then centred on the cell's trim (moved toward the fold by creep).
It is clipped to the cell's trim plus the layout's bleed, and never beyond
what the source offers around its box (its BleedBox, else CropBox, else
MediaBox): the bleed drawn is the smaller of the two.
"""

from __future__ import annotations

import attrs

from imposer.engine.fields import show
from imposer.engine.geometry import FIT_TOLERANCE, Cell, Rect
from imposer.engine.layout import Layout
from imposer.engine.source import SourcePage
from imposer.errors import InputPdfError

#: Pages whose sizes differ by less than this (points) count as the same size.
SIZE_TOLERANCE = 0.5
#: Clockwise display rotation -> the linear part of its matrix.
_LINEAR = {0: (1, 0, 0, 1), 90: (0, -1, 1, 0), 180: (-1, 0, 0, -1), 270: (0, 1, -1, 0)}


@attrs.frozen(kw_only=True)
class Fit:
    """How one source page is fitted to the cells (the same in every cell)."""

    #: 90 if the page is turned anticlockwise to match the cell's orientation, else 0.
    turn: int = 0
    #: Scale applied to the page: 1 unless ``fit`` shrinks or enlarges it.
    scale: float = 1.0


@attrs.frozen(kw_only=True)
class Placement:
    """One page in one cell."""

    #: Sheet-space clip rectangle.
    clip: Rect
    #: The ``cm`` matrix (a, b, c, d, e, f) from page space to sheet space.
    matrix: tuple[float, ...]
    #: Least bleed the source offers on a side where the cell wants bleed, points;
    #: None when it offers all the cell wants.
    short_bleed: float | None = None


def cell_size(layout: Layout, first: SourcePage) -> tuple[float, float]:
    """Return the trim size of every cell: the layout's ``cell``, or page 1 as displayed."""
    if layout.cell is not None:
        return layout.cell.width, layout.cell.height
    return first.width, first.height


def _landscape(width: float, height: float) -> bool | None:
    return None if abs(width - height) <= SIZE_TOLERANCE else width > height


def fit_page(layout: Layout, page: SourcePage, cell_w: float, cell_h: float) -> Fit:
    """Decide the turn and scale of *page*; refuse a size the layout does not accept."""
    w, h, turn = page.width, page.height, 0
    page_way, cell_way = _landscape(w, h), _landscape(cell_w, cell_h)
    if layout.rotate_to_fit and None not in (page_way, cell_way) and page_way != cell_way:
        w, h, turn = h, w, 90
    scale = 1.0
    if layout.fit != "none":
        scale = min(cell_w / w, cell_h / h)
        if layout.fit == "shrink":
            scale = min(1.0, scale)
        if abs(scale - 1) * max(w, h) <= FIT_TOLERANCE:
            scale = 1.0
    elif layout.mixed_sizes == "refuse" and (abs(w - cell_w) > SIZE_TOLERANCE
                                             or abs(h - cell_h) > SIZE_TOLERANCE):
        other = "the layout's cell" if layout.cell else "page 1"
        turned = " turned" if turn else ""
        raise InputPdfError(
            f"input page {page.index + 1}{turned} is {show(w)} x {show(h)} but {other} is "
            f"{show(cell_w)} x {show(cell_h)}; mixed page sizes are refused (set "
            f"\"mixed_sizes\": \"center\" to centre each page in its cell, or \"fit\": "
            f"\"shrink\" or \"fit\" to scale it)")
    return Fit(turn=turn, scale=scale)


def matrix(page: SourcePage, rotate: int, scale: float, x: float, y: float
           ) -> tuple[float, ...]:
    """Return the cm matrix turning the page's box by *rotate* (clockwise), scaled, to (x, y)."""
    a, b, c, d = (v * scale for v in _LINEAR[rotate])
    box = page.box
    xs = [a * px + c * py for px in (box.x0, box.x1) for py in (box.y0, box.y1)]
    ys = [b * px + d * py for px in (box.x0, box.x1) for py in (box.y0, box.y1)]
    return (a, b, c, d, x - min(xs), y - min(ys))


def transform(rect: Rect, m: tuple[float, ...]) -> Rect:
    """Return the sheet-space bounding box of page-space *rect* under matrix *m*."""
    a, b, c, d, e, f = m
    xs = [a * px + c * py + e for px in (rect.x0, rect.x1) for py in (rect.y0, rect.y1)]
    ys = [b * px + d * py + f for px in (rect.x0, rect.x1) for py in (rect.y0, rect.y1)]
    return Rect(x0=min(xs), y0=min(ys), x1=max(xs), y1=max(ys))


def place(page: SourcePage, fit: Fit, cell: Cell, dx: float = 0.0) -> Placement:
    """Centre *page* on *cell* (moved *dx* across for creep) and clip it to its bleed."""
    rotate = (page.rotate + (270 if fit.turn else 0) + cell.turn) % 360
    turned = rotate in (90, 270)
    w = (page.box.height if turned else page.box.width) * fit.scale
    h = (page.box.width if turned else page.box.height) * fit.scale
    x = cell.trim.x0 + (cell.trim.width - w) / 2 + dx
    y = cell.trim.y0 + (cell.trim.height - h) / 2
    m = matrix(page, rotate, fit.scale, x, y)
    trim = Rect(x0=x, y0=y, x1=x + w, y1=y + h)
    c, t = cell.clip, cell.trim
    wanted = (t.x0 - c.x0, c.x1 - t.x1, t.y0 - c.y0, c.y1 - t.y1)
    offered = transform(page.bleed, m)
    has = (trim.x0 - offered.x0, offered.x1 - trim.x1, trim.y0 - offered.y0,
           offered.y1 - trim.y1)
    short = [got for want, got in zip(wanted, has) if want - got > 0.01]
    clip = c.intersect(trim.expand(*wanted)).intersect(offered)
    return Placement(clip=clip, matrix=m, short_bleed=max(0.0, min(short)) if short else None)
