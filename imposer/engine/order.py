"""Which source page goes in which cell of which sheet side.

A plan is a list of sheet sides in output order (front, back, front, ... when
printed on both sides); each side lists, for every cell in reading order as
seen on that side, the 0-based source page index or None for a blank.
"""

from __future__ import annotations

from imposer.engine.geometry import behind
from imposer.engine.layout import Grid, Kind, Layout

Plan = list[list[int | None]]


def two_sided(layout: Layout) -> bool:
    """Say whether every sheet has a back in the output."""
    return layout.kind.booklet or layout.duplex != "none"


def side_count(layout: Layout, pages: int, grid: Grid) -> int:
    """Return how many sheet sides ``plan`` will write, without building it."""
    cells = grid.cols * grid.rows
    if layout.kind.booklet:
        return _pad(pages, 4) // 2
    if layout.kind is Kind.STEP_REPEAT:
        return _pad(pages, 2) if two_sided(layout) else pages
    if two_sided(layout):
        return 2 * -(-pages // (2 * cells))
    return -(-pages // cells)


def sheet_number(layout: Layout, side: int) -> int:
    """Return the 0-based sheet a side of the plan belongs to."""
    return side // 2 if two_sided(layout) else side


def nesting(layout: Layout, side: int) -> int:
    """Return how many sheets lie outside this side's sheet in its booklet or signature."""
    sheet = side // 2
    if layout.kind is Kind.PERFECT:
        return sheet % (layout.signature_sheets or 1)
    return sheet


def plan(layout: Layout, pages: int, grid: Grid) -> Plan:
    """Return the sides to print for *pages* source pages on sheets of *grid*."""
    cells = grid.cols * grid.rows
    if layout.kind is Kind.SADDLE:
        return booklet(pages, 0, _pad(pages, 4))
    if layout.kind is Kind.PERFECT:
        total, per = _pad(pages, 4), 4 * (layout.signature_sheets or 1)
        return [side for start in range(0, total, per)
                for side in booklet(pages, start, min(per, total - start))]
    if layout.kind is Kind.STEP_REPEAT:
        if not two_sided(layout):
            return [[page] * cells for page in range(pages)]
        return [[p if p < pages else None] * cells for p in range(_pad(pages, 2))]
    if not two_sided(layout):
        return [_fill(range(start, min(start + cells, pages)), cells)
                for start in range(0, pages, cells)]
    sides: Plan = []
    for start in range(0, pages, 2 * cells):
        front: list[int | None] = [None] * cells
        back: list[int | None] = [None] * cells
        for j in range(cells):
            page = start + 2 * j
            front[j] = page if page < pages else None
            back[behind(j, grid, layout.duplex)] = page + 1 if page + 1 < pages else None
        sides += [front, back]
    return sides


def booklet(pages: int, start: int, count: int) -> Plan:
    """Return the sides of *count* pages from *start* folded as nested sheets.

    Sheet s (from the outside) carries, as seen: front ``last-2s | first+2s``
    and back ``first+2s+1 | last-2s-1``; pages past the end of the document
    are blanks.
    """
    sides: Plan = []
    for s in range(count // 4):
        left, right = start + count - 1 - 2 * s, start + 2 * s
        sides.append([_page(left, pages), _page(right, pages)])
        sides.append([_page(right + 1, pages), _page(left - 1, pages)])
    return sides


def _page(index: int, pages: int) -> int | None:
    return index if index < pages else None


def _pad(count: int, multiple: int) -> int:
    return -(-count // multiple) * multiple


def _fill(pages: range, cells: int) -> list[int | None]:
    side: list[int | None] = list(pages)
    return side + [None] * (cells - len(side))
