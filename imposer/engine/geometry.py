"""Where each cell of a sheet goes, in points, for both sides of the sheet.

Cells are the trim rectangles of the grid, centred in the sheet's area inside
the margins, with the gutter between trims. Each cell's clip is its trim plus
the bleed on every side that has bleed (a booklet's pages have none at the
fold). The back of a sheet is the mirror image of the front about the sheet's
vertical centre line, so a work-and-turn back lines up with its front.
"""

from __future__ import annotations

import math

import attrs

from imposer.engine.layout import Grid, Layout
from imposer.engine.spec import show
from imposer.errors import LayoutError

#: Overshoot forgiven when checking that a grid fits, points.
FIT_TOLERANCE = 1e-3


@attrs.frozen(kw_only=True)
class Rect:
    """An axis-aligned rectangle in points."""

    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    def expand(self, left: float, right: float, bottom: float, top: float) -> Rect:
        return Rect(x0=self.x0 - left, y0=self.y0 - bottom, x1=self.x1 + right, y1=self.y1 + top)

    def intersect(self, other: Rect) -> Rect:
        return Rect(x0=max(self.x0, other.x0), y0=max(self.y0, other.y0),
                    x1=min(self.x1, other.x1), y1=min(self.y1, other.y1))

    def mirror(self, width: float) -> Rect:
        """Reflect about the vertical line x = width / 2."""
        return Rect(x0=width - self.x1, y0=self.y0, x1=width - self.x0, y1=self.y1)

    def as_list(self) -> list[float]:
        return [self.x0, self.y0, self.x1, self.y1]


@attrs.frozen(kw_only=True)
class Cell:
    """One slot for a page: its trim and the clip (trim plus bleed) around it."""

    trim: Rect
    clip: Rect


@attrs.frozen(kw_only=True)
class Side:
    """One printed side of a sheet: its cells in reading order as seen, and its boxes."""

    cells: tuple[Cell, ...]
    #: Bounding box of all cell trims: the sheet's TrimBox.
    trim_box: Rect
    #: trim_box grown by the bleed, inside the sheet: the sheet's BleedBox.
    bleed_box: Rect
    #: x of every vertical cut line, and of every fold (booklets) in folds_x.
    cuts_x: tuple[float, ...]
    cuts_y: tuple[float, ...]
    folds_x: tuple[float, ...] = ()


@attrs.frozen(kw_only=True)
class SheetGeometry:
    """Both sides of every sheet of one imposition (all sheets are alike)."""

    width: float
    height: float
    grid: Grid
    front: Side
    back: Side


def extent(layout: Layout) -> float:
    """Return how far bleed and marks reach beyond the block of trims."""
    marks = layout.marks
    return layout.bleed + (marks.offset + marks.length if marks else 0.0)


def fit_grid(layout: Layout, cell_w: float, cell_h: float) -> Grid:
    """Return the layout's grid, or the largest grid of this cell size the sheet holds."""
    s, m, g = layout.sheet, layout.margins, layout.gutter
    room_w = s.width - m.left - m.right - 2 * extent(layout)
    room_h = s.height - m.top - m.bottom - 2 * extent(layout)
    if layout.grid is not None:
        grid = layout.grid
    else:
        grid = Grid(cols=max(0, math.floor((room_w + g.x + FIT_TOLERANCE) / (cell_w + g.x))),
                    rows=max(0, math.floor((room_h + g.y + FIT_TOLERANCE) / (cell_h + g.y))))
    need_w = grid.cols * cell_w + (grid.cols - 1) * g.x
    need_h = grid.rows * cell_h + (grid.rows - 1) * g.y
    if grid.cols < 1 or grid.rows < 1 or need_w > room_w + FIT_TOLERANCE \
            or need_h > room_h + FIT_TOLERANCE:
        shown = "auto" if layout.grid is None else f"{grid.cols} x {grid.rows}"
        raise LayoutError(
            f"layout field 'grid': {shown} cells of {show(cell_w)} x {show(cell_h)} "
            f"need {show(max(need_w, cell_w) + 2 * extent(layout))} x "
            f"{show(max(need_h, cell_h) + 2 * extent(layout))} with gutter, bleed and marks, "
            f"but the sheet {layout.sheet.label} holds {show(room_w + 2 * extent(layout))} x "
            f"{show(room_h + 2 * extent(layout))} inside its margins")
    return grid


def mirror_index(index: int, grid: Grid) -> int:
    """Return the cell seen at the same place after turning the sheet left to right."""
    row, col = divmod(index, grid.cols)
    return row * grid.cols + (grid.cols - 1 - col)


def sheet_geometry(layout: Layout, cell_w: float, cell_h: float) -> SheetGeometry:
    """Lay out the cells of one sheet for pages whose trim is cell_w x cell_h points."""
    grid = fit_grid(layout, cell_w, cell_h)
    s, m, g, bleed = layout.sheet, layout.margins, layout.gutter, layout.bleed
    block_w = grid.cols * cell_w + (grid.cols - 1) * g.x
    block_h = grid.rows * cell_h + (grid.rows - 1) * g.y
    x0 = m.left + (s.width - m.left - m.right - block_w) / 2
    y0 = m.bottom + (s.height - m.bottom - m.top - block_h) / 2
    booklet = layout.kind.booklet
    cells = []
    for row in range(grid.rows):
        for col in range(grid.cols):
            x = x0 + col * (cell_w + g.x)
            y = y0 + block_h - (row + 1) * cell_h - row * g.y
            trim = Rect(x0=x, y0=y, x1=x + cell_w, y1=y + cell_h)
            left = 0.0 if booklet and col == 1 else bleed
            right = 0.0 if booklet and col == 0 else bleed
            cells.append(Cell(trim=trim, clip=trim.expand(left, right, bleed, bleed)))
    trim_box = Rect(x0=x0, y0=y0, x1=x0 + block_w, y1=y0 + block_h)
    sheet = Rect(x0=0.0, y0=0.0, x1=s.width, y1=s.height)
    xs = sorted({round(v, 6) for c in cells for v in (c.trim.x0, c.trim.x1)})
    front = Side(
        cells=tuple(cells), trim_box=trim_box,
        bleed_box=trim_box.expand(bleed, bleed, bleed, bleed).intersect(sheet),
        cuts_x=(xs[0], xs[-1]) if booklet else tuple(xs),
        cuts_y=tuple(sorted({round(v, 6) for c in cells for v in (c.trim.y0, c.trim.y1)})),
        folds_x=(cells[0].trim.x1,) if booklet else ())
    back_cells = tuple(
        Cell(trim=front.cells[j].trim.mirror(s.width), clip=front.cells[j].clip.mirror(s.width))
        for j in (mirror_index(i, grid) for i in range(len(cells))))
    back = Side(
        cells=back_cells, trim_box=trim_box.mirror(s.width),
        bleed_box=front.bleed_box.mirror(s.width),
        cuts_x=tuple(sorted(s.width - x for x in front.cuts_x)), cuts_y=front.cuts_y,
        folds_x=tuple(s.width - x for x in front.folds_x))
    return SheetGeometry(width=s.width, height=s.height, grid=grid, front=front, back=back)
