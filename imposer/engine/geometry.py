"""Where each cell of a sheet goes, in points, for both sides of the sheet.

Cells are the trim rectangles of the grid, centred in the sheet's area inside
the margins, with the gutter between trims. Each cell's clip is its trim plus
the bleed on every side that has bleed (a booklet's pages have none at the
fold). The margins are the press's, so on a sheet printed on both sides they
hold on the back as well: the back is printed on the same press with the sheet
turned (left and right edges swap) or tumbled (head and tail swap, so the
gripper takes the other edge), and the block keeps the larger margin of each
swapped pair on both of those edges. The back of a sheet is the mirror image of
the front about the sheet's vertical centre line, so a work-and-turn back lines
up with its front; a work-and-tumble back mirrors it about the horizontal centre
line instead, with every page turned 180 degrees, because the sheet is turned
head over tail.
"""

from __future__ import annotations

import math

import attrs

from imposer.engine.fields import show, show_over
from imposer.engine.layout import Grid, Layout, Margins
from imposer.errors import LayoutError

#: Overshoot forgiven when checking that pages fit, points: covers sizes written
#: rounded to 2 decimals (A5 as 419.53 x 595.28 pt) with room to spare.
FIT_TOLERANCE = 0.05


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

    def flip(self, height: float) -> Rect:
        """Reflect about the horizontal line y = height / 2."""
        return Rect(x0=self.x0, y0=height - self.y1, x1=self.x1, y1=height - self.y0)

    def union(self, other: Rect) -> Rect:
        return Rect(x0=min(self.x0, other.x0), y0=min(self.y0, other.y0),
                    x1=max(self.x1, other.x1), y1=max(self.y1, other.y1))

    def as_list(self) -> list[float]:
        return [self.x0, self.y0, self.x1, self.y1]


@attrs.frozen(kw_only=True)
class Cell:
    """One slot for a page: its trim and the clip (trim plus bleed) around it."""

    trim: Rect
    clip: Rect
    #: Degrees every page in this cell is turned (180 on a work-and-tumble back).
    turn: int = 0


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


def extent(layout: Layout) -> tuple[float, float]:
    """Return how far bleed and marks reach beyond the block of trims, across and up.

    Each band of marks is ``offset + length``: the crop marks' band, then the
    outer band (registration targets at the corners, the colour bar below, the
    slug above), which the sides need only for registration targets.
    """
    marks, x = layout.marks, layout.bleed
    if marks is None:
        return x, x
    band = marks.offset + marks.length
    x += band if marks.crop else 0.0
    return (x + (band if marks.registration else 0.0), x + (band if marks.outer_band else 0.0))


def press_margins(layout: Layout) -> Margins:
    """Return the margins the block keeps on the sheet, so that both sides keep theirs.

    The back's margins, seen on the sheet, are the front's mirrored by the duplex:
    a work-and-turn back swaps left and right, a work-and-tumble back top and
    bottom. Each edge keeps the larger of the two margins that fall on it.
    """
    m = layout.margins
    if layout.duplex == "work_and_turn":
        side = max(m.left, m.right)
        return attrs.evolve(m, left=side, right=side)
    if layout.duplex == "work_and_tumble":
        end = max(m.top, m.bottom)
        return attrs.evolve(m, top=end, bottom=end)
    return m


def fit_grid(layout: Layout, cell_w: float, cell_h: float) -> Grid:
    """Return the layout's grid, or the largest grid of this cell size the sheet holds."""
    s, m, g = layout.sheet, press_margins(layout), layout.gutter
    ext_x, ext_y = extent(layout)
    room_w = s.width - m.left - m.right - 2 * ext_x
    room_h = s.height - m.top - m.bottom - 2 * ext_y
    if layout.grid is not None:
        grid = layout.grid
    else:
        grid = Grid(cols=min(100, max(0, math.floor((room_w + g.x + FIT_TOLERANCE)
                                                    / (cell_w + g.x)))),
                    rows=min(100, max(0, math.floor((room_h + g.y + FIT_TOLERANCE)
                                                    / (cell_h + g.y)))))
    need_w = max(grid.cols * cell_w + (grid.cols - 1) * g.x, cell_w)
    need_h = max(grid.rows * cell_h + (grid.rows - 1) * g.y, cell_h)
    over_w, over_h = need_w - room_w, need_h - room_h
    if grid.cols < 1 or grid.rows < 1 or over_w > FIT_TOLERANCE or over_h > FIT_TOLERANCE:
        shown = "auto" if layout.grid is None else f"{grid.cols} x {grid.rows}"
        nw, hw = show_over(need_w + 2 * ext_x, room_w + 2 * ext_x)
        nh, hh = show_over(need_h + 2 * ext_y, room_h + 2 * ext_y)
        over = [f"{word} by {show(amount, 3)}" for word, amount in
                (("too wide", over_w), ("too tall", over_h)) if amount > FIT_TOLERANCE]
        raise LayoutError(
            f"layout field 'grid': {shown} cells of {show(cell_w)} x "
            f"{show(cell_h)} need {nw} x {nh} with gutter, bleed and marks, "
            f"but the sheet {layout.sheet.label} holds {hw} x {hh} inside its margins"
            f"{_both_sides(layout)} "
            f"({' and '.join(over)}; fit checks forgive {FIT_TOLERANCE} pt)")
    return grid


def _both_sides(layout: Layout) -> str:
    """Say, when the duplex widened a margin, that both sides' margins were kept."""
    if press_margins(layout) == layout.margins:
        return ""
    edges = "left and right" if layout.duplex == "work_and_turn" else "top and bottom"
    return f" on both sides (the back swaps {edges}, so each keeps the larger)"


def mirror_index(index: int, grid: Grid) -> int:
    """Return the cell seen at the same place after turning the sheet left to right."""
    row, col = divmod(index, grid.cols)
    return row * grid.cols + (grid.cols - 1 - col)


def flip_index(index: int, grid: Grid) -> int:
    """Return the cell seen at the same place after turning the sheet head over tail."""
    row, col = divmod(index, grid.cols)
    return (grid.rows - 1 - row) * grid.cols + col


def behind(index: int, grid: Grid, duplex: str) -> int:
    """Return the back cell (in the back's reading order) behind front cell *index*."""
    return flip_index(index, grid) if duplex == "work_and_tumble" else mirror_index(index, grid)


def sheet_geometry(layout: Layout, cell_w: float, cell_h: float) -> SheetGeometry:
    """Lay out the cells of one sheet for pages whose trim is cell_w x cell_h points."""
    grid = fit_grid(layout, cell_w, cell_h)
    s, m, g, bleed = layout.sheet, press_margins(layout), layout.gutter, layout.bleed
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
    if layout.duplex == "work_and_tumble":
        back = Side(
            cells=tuple(Cell(trim=front.cells[j].trim.flip(s.height),
                             clip=front.cells[j].clip.flip(s.height), turn=180)
                        for j in (flip_index(i, grid) for i in range(len(cells)))),
            trim_box=trim_box.flip(s.height), bleed_box=front.bleed_box.flip(s.height),
            cuts_x=front.cuts_x, cuts_y=tuple(sorted(s.height - y for y in front.cuts_y)))
    else:
        back = Side(
            cells=tuple(Cell(trim=front.cells[j].trim.mirror(s.width),
                             clip=front.cells[j].clip.mirror(s.width))
                        for j in (mirror_index(i, grid) for i in range(len(cells)))),
            trim_box=trim_box.mirror(s.width), bleed_box=front.bleed_box.mirror(s.width),
            cuts_x=tuple(sorted(s.width - x for x in front.cuts_x)), cuts_y=front.cuts_y,
            folds_x=tuple(s.width - x for x in front.folds_x))
    return SheetGeometry(width=s.width, height=s.height, grid=grid, front=front, back=back)
