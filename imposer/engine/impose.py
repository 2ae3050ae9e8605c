"""Impose an input PDF onto press sheets with pikepdf.

Every source page becomes one form XObject, stored once however often it is
placed; each placement is ``q <clip> re W n <matrix> cm /Pn Do Q`` on the
sheet, so the page shows exactly its trim plus the bleed the layout keeps.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import attrs
import pikepdf

from imposer.engine.geometry import Cell, Rect, SheetGeometry, Side, sheet_geometry
from imposer.engine.layout import Layout
from imposer.engine.marks import marks_form, num, registration
from imposer.engine.order import plan, two_sided
from imposer.engine.presets import load_layout
from imposer.engine.source import SourcePage, inherited, open_input, read_pages
from imposer.errors import InputPdfError


@attrs.frozen(kw_only=True)
class ImposeSummary:
    """What one imposition produced."""

    #: Physical sheets (a sheet printed on both sides counts once).
    sheets: int
    #: Sheet size, points.
    sheet_width: float
    sheet_height: float
    #: Pages of the output PDF (two per sheet when printed on both sides).
    sides: int
    #: Pages in the input PDF.
    input_pages: int
    #: Placements of input pages on sheets (a repeated page counts every time).
    pages_placed: int
    #: Cells left empty (booklet padding, the end of the last n-up sheet).
    blank_cells: int
    #: Wall-clock seconds the imposition took.
    seconds: float


def impose(layout: Layout | str | dict, in_path: str | Path,
           out_path: str | Path) -> ImposeSummary:
    """Impose *in_path* by *layout* into *out_path*; raise InputPdfError or LayoutError.

    *layout* is a Layout, or anything ``load_layout`` accepts.
    """
    started = time.monotonic()
    layout = load_layout(layout)
    with open_input(in_path) as src, pikepdf.new() as out:
        pages = read_pages(src, layout)
        geometry = sheet_geometry(layout, pages[0].width, pages[0].height)
        sides = plan(layout, len(pages), geometry.grid)
        _Writer(src, out, layout, geometry, pages).write(sides)
        _save(out, Path(out_path))
    placed = sum(p is not None for side in sides for p in side)
    return ImposeSummary(
        sheets=len(sides) // 2 if two_sided(layout) else len(sides),
        sheet_width=geometry.width, sheet_height=geometry.height, sides=len(sides),
        input_pages=len(pages), pages_placed=placed,
        blank_cells=sum(len(side) for side in sides) - placed,
        seconds=time.monotonic() - started)


def _save(out: pikepdf.Pdf, path: Path) -> None:
    """Write the sheets beside *path*, then rename, so no half-written plate is left."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as stream:  # an unwritable output is OSError, not bad input
            out.save(stream, compress_streams=True,
                     object_stream_mode=pikepdf.ObjectStreamMode.generate)
        os.replace(tmp, path)
    except pikepdf.PikepdfError as exc:  # source objects are read lazily, at write time
        raise InputPdfError(f"input PDF is corrupt: {exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


def matrix(page: SourcePage, x: float, y: float) -> tuple[float, ...]:
    """Return the cm matrix putting the page's box, as displayed, with its corner at (x, y)."""
    b = page.box
    return {
        0: (1, 0, 0, 1, x - b.x0, y - b.y0),
        90: (0, -1, 1, 0, x - b.y0, y + b.x1),
        180: (-1, 0, 0, -1, x + b.x1, y + b.y1),
        270: (0, 1, -1, 0, x + b.y1, y - b.x0),
    }[page.rotate]


def placement(page: SourcePage, cell: Cell) -> tuple[Rect, tuple[float, ...]]:
    """Return the clip and matrix that centre *page* on *cell* and keep its bleed."""
    x = cell.trim.x0 + (cell.trim.width - page.width) / 2
    y = cell.trim.y0 + (cell.trim.height - page.height) / 2
    trim = Rect(x0=x, y0=y, x1=x + page.width, y1=y + page.height)
    c, t = cell.clip, cell.trim
    own = trim.expand(t.x0 - c.x0, c.x1 - t.x1, t.y0 - c.y0, c.y1 - t.y1)
    return cell.clip.intersect(own), matrix(page, x, y)


class _Writer:
    """Build the output sheets; forms are made on first use and reused after."""

    def __init__(self, src: pikepdf.Pdf, out: pikepdf.Pdf, layout: Layout,
                 geometry: SheetGeometry, pages: list[SourcePage]) -> None:
        self.src, self.out, self.layout, self.geometry, self.pages = src, out, layout, geometry, pages
        self.forms: dict[int, pikepdf.Object] = {}
        self.marks: dict[str, pikepdf.Object] = {}
        if layout.marks:
            colour = registration(out)
            for key, side in (("front", geometry.front), ("back", geometry.back)):
                self.marks[key] = out.make_indirect(marks_form(
                    out, side, layout.marks, layout.bleed, geometry.width, geometry.height,
                    colour))

    def write(self, sides: list[list[int | None]]) -> None:
        duplex = two_sided(self.layout)
        for number, side_plan in enumerate(sides):
            key = "back" if duplex and number % 2 else "front"
            side = self.geometry.back if key == "back" else self.geometry.front
            self._sheet_side(side, side_plan, self.marks.get(key))

    def _sheet_side(self, side: Side, side_plan: list[int | None],
                    marks: pikepdf.Object | None) -> None:
        xobjects = pikepdf.Dictionary()
        ops = []
        for cell, index in zip(side.cells, side_plan):
            if index is None:
                continue
            name = f"/P{index + 1}"
            xobjects[name] = self._form(index)
            clip, m = placement(self.pages[index], cell)
            ops.append(f"q {num(clip.x0)} {num(clip.y0)} {num(clip.width)} {num(clip.height)} "
                       f"re W n {' '.join(num(v) for v in m)} cm {name} Do Q")
        if marks is not None:
            xobjects["/M"] = marks
            ops.append("/M Do")
        g = self.geometry
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page, MediaBox=[0, 0, g.width, g.height],
            TrimBox=side.trim_box.as_list(), BleedBox=side.bleed_box.as_list(),
            Resources=pikepdf.Dictionary(XObject=xobjects),
            Contents=self.out.make_stream("\n".join(ops).encode()))
        self.out.pages.append(pikepdf.Page(page))

    def _form(self, index: int) -> pikepdf.Object:
        """Return the form XObject of source page *index*, copying it over once."""
        form = self.forms.get(index)
        if form is None:
            form = self.forms[index] = self.out.copy_foreign(self._source_form(index))
        return form

    def _source_form(self, index: int) -> pikepdf.Object:
        """Wrap a source page as a form XObject in the source PDF, reusing its raw content."""
        page, media = self.src.pages[index].obj, self.pages[index].media
        contents = page.get("/Contents")
        form = pikepdf.Stream(self.src, b"")
        try:
            if isinstance(contents, pikepdf.Stream):
                form.write(contents.read_raw_bytes(), filter=contents.get("/Filter"),
                           decode_parms=contents.get("/DecodeParms"))
            elif isinstance(contents, pikepdf.Array):
                form.write(b"\n".join(s.read_bytes() for s in contents
                                      if isinstance(s, pikepdf.Stream)))
        except (pikepdf.PikepdfError, TypeError, ValueError) as exc:
            raise InputPdfError(f"input page {index + 1} content is unreadable: {exc}") from None
        form.Type, form.Subtype = pikepdf.Name.XObject, pikepdf.Name.Form
        form.BBox = media.as_list()
        resources = inherited(page, "/Resources")
        form.Resources = resources if resources is not None else pikepdf.Dictionary()
        if "/Group" in page:
            form.Group = page.Group
        return form
