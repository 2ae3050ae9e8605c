"""Write the sheets: one page per sheet side, each placement a form XObject drawn once.

Every source page becomes one form XObject, stored once however often it is
placed; each placement is ``q <clip> re W n <matrix> cm /Pn Do Q`` on the
sheet. The marks of a side are one shared form; the slug line, which names
the sheet, is written into each side's own content.
"""

from __future__ import annotations

import pikepdf

from imposer.engine.budget import Budget, filter_names
from imposer.engine.geometry import SheetGeometry, Side
from imposer.engine.layout import DEFAULT_SLUG, Layout
from imposer.engine.marks import num, registration
from imposer.engine.order import nesting, sheet_number, two_sided
from imposer.engine.placement import Fit, place
from imposer.engine.printmarks import marks_form, slug_font, slug_ops
from imposer.engine.source import SourcePage, inherited
from imposer.engine.units import fmt, mm
from imposer.errors import InputPdfError


class Writer:
    """Build the output sheets; forms are made on first use and reused after."""

    def __init__(self, src: pikepdf.Pdf, out: pikepdf.Pdf, layout: Layout,
                 geometry: SheetGeometry, pages: list[SourcePage], fits: list[Fit],
                 budget: Budget, slug_fields: dict[str, str],
                 process: str = "/DeviceCMYK") -> None:
        self.src, self.out, self.layout, self.geometry = src, out, layout, geometry
        self.pages, self.fits, self.budget, self.slug_fields = pages, fits, budget, slug_fields
        #: The colour space marks and the slug are drawn in: the output intent's process.
        self.process = process
        self.forms: dict[int, pikepdf.Object] = {}
        self.page_objs = [p.obj for p in src.pages]  # src.pages[i] walks the list each time
        self.marks: dict[str, pikepdf.Object] = {}
        #: Page index -> least bleed its source offers where the layout wants more, points.
        self.short_bleed: dict[int, float] = {}
        marks = layout.marks
        if marks:
            colour = registration(out, process)
            for key, side in (("front", geometry.front), ("back", geometry.back)):
                self.marks[key] = out.make_indirect(marks_form(
                    out, side, marks, layout.bleed, geometry.width, geometry.height, colour,
                    process))
        self.font = slug_font(out) if marks and marks.slug else None

    def write(self, sides: list[list[int | None]], sheets: int) -> None:
        duplex = two_sided(self.layout)
        for number, side_plan in enumerate(sides):
            key = "back" if duplex and number % 2 else "front"
            side = self.geometry.back if key == "back" else self.geometry.front
            creep = self.layout.creep * nesting(self.layout, number) \
                if self.layout.kind.booklet else 0.0
            slug = self._slug(number, key, sheets)
            self._sheet_side(side, side_plan, self.marks.get(key), creep, slug)

    def _slug(self, number: int, key: str, sheets: int) -> str | None:
        marks = self.layout.marks
        if marks is None or marks.slug is None:
            return None
        values = {"job_id": "-", "tenant_id": "-", "layout": self.layout.name or "custom",
                  "sheet": str(sheet_number(self.layout, number) + 1), "sheets": str(sheets),
                  "side": key, "pages": str(len(self.pages))}
        values.update({k: str(v)[:100] for k, v in self.slug_fields.items() if k in values})
        return (marks.slug or DEFAULT_SLUG).format_map(values)

    def _sheet_side(self, side: Side, side_plan: list[int | None],
                    marks: pikepdf.Object | None, creep: float, slug: str | None) -> None:
        xobjects = pikepdf.Dictionary()
        ops = []
        fold = side.folds_x[0] if side.folds_x else None
        for cell, index in zip(side.cells, side_plan):
            if index is None:
                continue
            name = f"/P{index + 1}"
            xobjects[name] = self._form(index)
            dx = 0.0 if fold is None else (creep if cell.trim.x1 <= fold + 1e-6 else -creep)
            placed = place(self.pages[index], self.fits[index], cell, dx)
            if placed.short_bleed is not None:
                self.short_bleed[index] = min(placed.short_bleed,
                                              self.short_bleed.get(index, placed.short_bleed))
            clip, m = placed.clip, placed.matrix
            ops.append(f"q {num(clip.x0)} {num(clip.y0)} {num(clip.width)} {num(clip.height)} "
                       f"re W n {' '.join(num(v) for v in m)} cm {name} Do Q")
        if marks is not None:
            xobjects["/M"] = marks
            ops.append("/M Do")
        resources = pikepdf.Dictionary(XObject=xobjects)
        if slug is not None:
            ops.append(slug_ops(side, self.layout.marks, self.layout.bleed, slug, self.process))
            resources.Font = pikepdf.Dictionary(Slug=self.font)
        g = self.geometry
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page, MediaBox=[0, 0, g.width, g.height],
            TrimBox=side.trim_box.as_list(), BleedBox=side.bleed_box.as_list(),
            Resources=resources, Contents=self.out.make_stream("\n".join(ops).encode()))
        self.out.pages.append(pikepdf.Page(page))

    def _form(self, index: int) -> pikepdf.Object:
        """Return the form XObject of source page *index*, copying it over once."""
        form = self.forms.get(index)
        if form is None:
            form = self.forms[index] = self.out.copy_foreign(self._source_form(index))
        return form

    def _source_form(self, index: int) -> pikepdf.Object:
        """Wrap a source page as a form XObject in the source PDF, reusing its raw content."""
        page, media = self.page_objs[index], self.pages[index].media
        contents = page.get("/Contents")
        form = pikepdf.Stream(self.src, b"")
        try:
            if isinstance(contents, pikepdf.Stream):
                form.write(contents.read_raw_bytes(), filter=contents.get("/Filter"),
                           decode_parms=contents.get("/DecodeParms"))
            elif isinstance(contents, pikepdf.Array):
                form.write(b"\n".join(self._decoded(s, index) for s in contents
                                      if isinstance(s, pikepdf.Stream)))
        except (pikepdf.PikepdfError, TypeError, ValueError) as exc:
            raise InputPdfError(f"input page {index + 1} content is unreadable: {exc}") from None
        form.Type, form.Subtype = pikepdf.Name.XObject, pikepdf.Name.Form
        form.BBox = media.as_list()
        resources = inherited(page, "/Resources")
        form.Resources = resources if isinstance(resources, pikepdf.Dictionary) \
            else pikepdf.Dictionary()
        if "/Group" in page:
            form.Group = page.Group
        return form

    def _decoded(self, stream: pikepdf.Stream, index: int) -> bytes:
        """Decode one part of a page's content, within the budget (bombs stop here)."""
        filters = filter_names(stream)
        where = f"input page {index + 1} content"
        if filters and all(f in ("/FlateDecode", "/Fl") for f in filters) \
                and "/DecodeParms" not in stream:
            return self.budget.bounded_inflate(stream.read_raw_bytes(), len(filters), where)
        self.budget.check_stream(stream)
        return stream.read_bytes()


def bleed_warnings(layout: Layout, short: dict[int, float]) -> list[str]:
    """Say which pages offer less bleed than the layout asks for, pages grouped by amount."""
    groups: dict[float, list[int]] = {}
    for index, offered in sorted(short.items()):
        groups.setdefault(round(mm(offered), 1), []).append(index + 1)
    box = layout.page_box
    warnings = []
    for amount, numbers in groups.items():
        pages = _ranges(numbers)
        plural = len(numbers) > 1
        what = "no bleed" if amount < 0.05 else f"only {fmt(amount, 1)} mm of bleed"
        warnings.append(
            f"{'pages' if plural else 'page'} {pages} {'have' if plural else 'has'} {what} "
            f"beyond {'their' if plural else 'its'} {box}; the layout asks for "
            f"{fmt(mm(layout.bleed), 2)} mm (the bleed drawn is what the page offers)")
    return warnings


def _ranges(numbers: list[int]) -> str:
    """Write sorted page numbers as ``1-4, 7, 9-10``."""
    spans = [[numbers[0], numbers[0]]]
    for n in numbers[1:]:
        if n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
