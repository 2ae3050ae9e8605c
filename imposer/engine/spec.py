"""Parse and validate a layout spec (JSON data) into a :class:`Layout`.

A bad spec is a permanent job failure, so every complaint is a LayoutError
that names the field (``layout field 'gutter.x': ...``) and says what it wants.
"""

from __future__ import annotations

import re
from typing import Any

from imposer.engine.fields import MISSING, Fields, check_depth, kind_of, show
from imposer.engine.layout import (
    ANNOTATIONS,
    DEFAULT_SLUG,
    DUPLEX,
    FITS,
    MIXED_SIZES,
    PAGE_BOXES,
    SLUG_NAMES,
    CellSize,
    Grid,
    Gutter,
    Kind,
    Layout,
    Margins,
    Marks,
    PdfToolbox,
    Sheet,
)
from imposer.engine.templates import TEMPLATE_NAMES, template_fields
from imposer.engine.units import SIZES, UNITS, brief, parse_length, size_named
from imposer.errors import LayoutError

__all__ = ["parse_layout", "show"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_MAX_CELLS = 100
#: Thickest paper creep compensation accepts, points (1 mm is board, not paper).
_MAX_CREEP = parse_length("1mm", "pt")


def parse_layout(data: Any, name: str | None = None) -> Layout:
    """Return the Layout *data* describes; raise LayoutError naming the first bad field."""
    check_depth(data)
    top = Fields(data, "")
    version = top.take("version")
    if isinstance(version, bool) or version != Layout.VERSION:
        raise top.error("version", f"this engine reads version {Layout.VERSION}, "
                        f"got {brief(version)}")
    top.unit = top.choice("units", tuple(UNITS), "mm")
    spec_name = top.take("name", name)
    if spec_name is not None and (not isinstance(spec_name, str)
                                  or not _NAME_RE.match(spec_name)):
        raise top.error("name", f"want letters, digits, '.', '_' or '-', got {brief(spec_name)}")
    description = top.take("description", None)
    if description is not None and (not isinstance(description, str) or len(description) > 500):
        raise top.error("description", "want a string of at most 500 characters")
    kind = Kind(top.choice("kind", tuple(k.value for k in Kind)))
    fields = dict(
        name=spec_name, description=description, kind=kind,
        sheet=_sheet(top), grid=_grid(top, kind), margins=_margins(top),
        gutter=_gutter(top), bleed=top.length("bleed"),
        page_box=top.choice("page_box", PAGE_BOXES, "TrimBox"),
        marks=_marks(top), duplex=_duplex(top, kind),
        mixed_sizes=top.choice("mixed_sizes", MIXED_SIZES, "refuse"),
        cell=_cell(top), fit=top.choice("fit", FITS, "none"),
        rotate_to_fit=top.flag("rotate_to_fit", not kind.booklet),
        annotations=top.choice("annotations", ANNOTATIONS, "flatten"),
        pdftoolbox=_pdftoolbox(top))
    if kind is Kind.PERFECT:
        fields["signature_sheets"] = top.integer("signature_sheets", 1, 64, 4)
    elif top.take("signature_sheets", None) is not None:
        raise top.error("signature_sheets", "only a perfect-bound layout has signatures")
    fields["creep"] = top.length("creep")
    if fields["creep"] and not kind.booklet:
        raise top.error("creep", "only a saddle or perfect-bound layout creeps")
    if fields["creep"] > _MAX_CREEP:
        raise top.error("creep", f"is the paper thickness; want at most 1 mm, got "
                        f"{show(fields['creep'])}")
    top.finish()
    layout = Layout(**fields)
    _check(top, layout)
    return layout


def _sheet(top: Fields) -> Sheet:
    raw = top.take("sheet")
    sheet = Fields({"size": raw} if isinstance(raw, str) else raw, "sheet", top.unit)
    size = sheet.take("size", None)
    if size is not None:
        named = size_named(size) if isinstance(size, str) else None
        if named is None:
            raise sheet.error("size", f"unknown sheet size {brief(size)}; want one of "
                              f"{', '.join(SIZES)}, or width and height")
        for key in ("width", "height"):
            if sheet.take(key, None) is not None:
                raise sheet.error(key, "give either a named size or width and height, not both")
        size, (width, height) = named
    else:
        width = sheet.length("width", MISSING, positive=True)
        height = sheet.length("height", MISSING, positive=True)
    orientation = sheet.take("orientation", None)
    if orientation is not None:
        orientation = sheet.choice("orientation", ("portrait", "landscape"))
    sheet.finish()
    if orientation:
        short, long = sorted((width, height))
        width, height = (short, long) if orientation == "portrait" else (long, short)
    return Sheet(width=width, height=height, size=size, orientation=orientation)


def _grid(top: Fields, kind: Kind) -> Grid | None:
    raw = top.take("grid", {"cols": 2, "rows": 1} if kind.booklet else "auto")
    if raw == "auto":
        if kind.booklet:
            raise top.error("grid", f"a {kind.value} layout places a 2 x 1 spread; omit grid")
        return None
    grid = Fields(raw, "grid")
    cols = grid.integer("cols", 1, _MAX_CELLS)
    rows = grid.integer("rows", 1, _MAX_CELLS)
    grid.finish()
    if kind.booklet and (cols, rows) != (2, 1):
        raise top.error("grid", f"a {kind.value} layout places a 2 x 1 spread (the fold "
                        f"between the columns); got {cols} x {rows}")
    return Grid(cols=cols, rows=rows)


def _margins(top: Fields) -> Margins:
    raw = top.take("margins", 0.0)
    if isinstance(raw, (list, bool)):
        raise top.error("margins", f"want a length or an object of sides, got {brief(raw)}")
    if not isinstance(raw, dict):
        raw = {side: raw for side in ("top", "right", "bottom", "left")}
    margins = Fields(raw, "margins", top.unit)
    values = {side: margins.length(side) for side in ("top", "right", "bottom", "left")}
    margins.finish()
    return Margins(**values)


def _gutter(top: Fields) -> Gutter:
    raw = top.take("gutter", 0.0)
    gutter = Fields(raw if isinstance(raw, dict) else {"x": raw, "y": raw}, "gutter", top.unit)
    value = Gutter(x=gutter.length("x"), y=gutter.length("y"))
    gutter.finish()
    return value


def _cell(top: Fields) -> CellSize | None:
    raw = top.take("cell", None)
    if raw is None:
        return None
    cell = Fields(raw, "cell", top.unit)
    value = CellSize(width=cell.length("width", MISSING, positive=True),
                     height=cell.length("height", MISSING, positive=True))
    cell.finish()
    return value


def _marks(top: Fields) -> Marks | None:
    raw = top.take("marks", False)
    if raw is False:
        return None
    marks = Fields({} if raw is True else raw, "marks", top.unit)
    slug = marks.take("slug", False)
    if slug is True:
        slug = DEFAULT_SLUG
    elif slug is False:
        slug = None
    elif not isinstance(slug, str) or not 0 < len(slug) <= 200 or not slug.isprintable():
        raise marks.error("slug", "want true, false or a one-line template of at most 200 "
                          f"characters, got {brief(slug)}")
    if slug is not None:
        try:
            names = template_fields(slug)
        except ValueError as exc:
            raise marks.error("slug", str(exc)) from None
        for field in names:
            if field not in SLUG_NAMES:
                raise marks.error("slug", f"unknown placeholder {{{field}}}; want "
                                  + ", ".join(f"{{{n}}}" for n in SLUG_NAMES))
    value = Marks(length=marks.length("length", parse_length("5mm", "pt"), positive=True),
                  offset=marks.length("offset", parse_length("2mm", "pt")),
                  line_width=marks.length("line_width", 0.25, positive=True),
                  crop=marks.flag("crop", True),
                  registration=marks.flag("registration", False),
                  colour_bar=marks.flag("colour_bar", False), slug=slug)
    marks.finish()
    return value


def _duplex(top: Fields, kind: Kind) -> str:
    duplex = top.choice("duplex", DUPLEX, "work_and_turn" if kind.booklet else "none")
    if kind.booklet and duplex != "work_and_turn":
        raise top.error("duplex", f"a {kind.value} sheet is printed on both sides; "
                        "only work_and_turn applies")
    return duplex


def _pdftoolbox(top: Fields) -> PdfToolbox:
    tool = Fields(top.take("pdftoolbox", {}), "pdftoolbox")
    profile = tool.take("profile", None)
    if profile is not None and (not isinstance(profile, str) or not profile.strip()
                                or len(profile) > 255):
        raise tool.error("profile", f"want a profile name, got {brief(profile)}")
    raw = Fields(tool.take("variables", {}), "pdftoolbox.variables")
    variables = {}
    for key, value in raw.data.items():
        raw.used.add(key)
        if not _VAR_RE.match(key):
            raise raw.error(key, "a variable name is letters, digits, '_', '.' or '-'")
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, (str, int, float)) or "\n" in str(value) \
                or len(str(value)) > 1000:
            raise raw.error(key, f"want a one-line string or a number, got {kind_of(value)}")
        variables[key] = str(value)
    tool.finish()
    return PdfToolbox(profile=profile, variables=variables)


def _check(top: Fields, layout: Layout) -> None:
    """Refuse combinations no input PDF could satisfy."""
    s, m, g = layout.sheet, layout.margins, layout.grid
    if m.left + m.right >= s.width or m.top + m.bottom >= s.height:
        raise top.error("margins", f"leave no room on a {s.label} sheet")
    if layout.kind.booklet and layout.gutter.x:
        raise top.error("gutter.x", "booklet pages meet at the fold; want 0, got "
                        + show(layout.gutter.x))
    many_x = g is None or g.cols > 1
    for axis, gap, many in (("x", layout.gutter.x, many_x and not layout.kind.booklet),
                            ("y", layout.gutter.y, g is None or g.rows > 1)):
        if many and gap + 1e-9 < 2 * layout.bleed:
            raise top.error(f"gutter.{axis}", f"{show(gap)} is less than 2 x bleed "
                            f"({show(2 * layout.bleed)}): neighbours' bleed would overlap")
    for key, template in layout.pdftoolbox.variables.items():
        where = f"pdftoolbox.variables.{key}"
        try:
            names = template_fields(template)
        except ValueError as exc:
            raise LayoutError(f"layout field '{where}': {exc}") from None
        for field in names:
            if field not in TEMPLATE_NAMES:
                raise LayoutError(f"layout field '{where}': unknown placeholder {{{field}}}")
            if field in ("cols", "rows") and g is None:
                raise LayoutError(f"layout field '{where}': {{{field}}} needs a fixed grid")
