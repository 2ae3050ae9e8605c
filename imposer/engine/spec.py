"""Parse and validate a layout spec (JSON data) into a :class:`Layout`.

A bad spec is a permanent job failure, so every complaint is a LayoutError
that names the field (``layout field 'gutter.x': ...``) and says what it wants.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from imposer.engine.layout import (
    DUPLEX,
    MIXED_SIZES,
    PAGE_BOXES,
    TEMPLATE_NAMES,
    Grid,
    Gutter,
    Kind,
    Layout,
    Margins,
    Marks,
    PdfToolbox,
    Sheet,
    template_fields,
)
from imposer.engine.units import (
    SIZES,
    UNITS,
    LengthError,
    fmt,
    mm,
    parse_length,
    size_named,
)
from imposer.errors import LayoutError

_MISSING = object()
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_MAX_CELLS = 100


def show(points: float) -> str:
    """Format a length for an error message, in mm and pt."""
    return f"{fmt(mm(points), 2)} mm ({fmt(points, 2)} pt)"


class _Fields:
    """One JSON object being read: remembers the keys used so leftovers can be named."""

    def __init__(self, data: Any, path: str, unit: str = "mm") -> None:
        if not isinstance(data, dict):
            where = f"layout field '{path}'" if path else "layout"
            raise LayoutError(f"{where}: want a JSON object, got {_kind(data)}")
        self.data, self.path, self.unit, self.used = data, path, unit, set()

    def error(self, key: str, message: str) -> LayoutError:
        where = f"{self.path}.{key}" if self.path else key
        return LayoutError(f"layout field '{where}': {message}")

    def take(self, key: str, default: Any = _MISSING) -> Any:
        self.used.add(key)
        if key not in self.data or self.data[key] is None:
            if default is _MISSING:
                raise self.error(key, "missing (required)")
            return default
        return self.data[key]

    def length(self, key: str, default: Any = 0.0, positive: bool = False) -> float:
        """Read a length in the spec's unit; *default* is in points."""
        if default is not _MISSING and self.data.get(key) is None:
            self.used.add(key)
            return default
        raw = self.take(key)
        try:
            value = parse_length(raw, self.unit)
        except LengthError as exc:
            raise self.error(key, str(exc)) from None
        if value < 0 or (positive and value == 0):
            raise self.error(key, f"must be {'> 0' if positive else '>= 0'}, got {raw!r}")
        return value

    def choice(self, key: str, options: tuple[str, ...] | dict, default: Any = _MISSING) -> Any:
        raw = self.take(key, default)
        for option in options:
            if isinstance(raw, str) and raw.lower() == option.lower():
                return option
        raise self.error(key, f"want one of {', '.join(options)}; got {raw!r}")

    def integer(self, key: str, low: int, high: int, default: Any = _MISSING) -> int:
        raw = self.take(key, default)
        if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
            raise self.error(key, f"want a whole number from {low} to {high}, got {raw!r}")
        return raw

    def finish(self) -> None:
        for key in self.data:
            if key not in self.used:
                near = difflib.get_close_matches(key, list(self.used), n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                raise self.error(key, f"unknown field{hint}")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), repr(value))


def parse_layout(data: Any, name: str | None = None) -> Layout:
    """Return the Layout *data* describes; raise LayoutError naming the first bad field."""
    top = _Fields(data, "")
    version = top.take("version")
    if isinstance(version, bool) or version != Layout.VERSION:
        raise top.error("version", f"this engine reads version {Layout.VERSION}, got {version!r}")
    top.unit = top.choice("units", tuple(UNITS), "mm")
    spec_name = top.take("name", name)
    if spec_name is not None and (not isinstance(spec_name, str)
                                  or not _NAME_RE.match(spec_name)):
        raise top.error("name", f"want letters, digits, '.', '_' or '-', got {spec_name!r}")
    description = top.take("description", None)
    if description is not None and not isinstance(description, str):
        raise top.error("description", "want a string")
    kind = Kind(top.choice("kind", tuple(k.value for k in Kind)))
    fields = dict(
        name=spec_name, description=description, kind=kind,
        sheet=_sheet(top), grid=_grid(top, kind), margins=_margins(top),
        gutter=_gutter(top), bleed=top.length("bleed"),
        page_box=top.choice("page_box", PAGE_BOXES, "TrimBox"),
        marks=_marks(top), duplex=_duplex(top, kind),
        mixed_sizes=top.choice("mixed_sizes", MIXED_SIZES, "refuse"),
        pdftoolbox=_pdftoolbox(top))
    if kind is Kind.PERFECT:
        fields["signature_sheets"] = top.integer("signature_sheets", 1, 64, 4)
    elif top.take("signature_sheets", None) is not None:
        raise top.error("signature_sheets", "only a perfect-bound layout has signatures")
    top.finish()
    layout = Layout(**fields)
    _check(top, layout)
    return layout


def _sheet(top: _Fields) -> Sheet:
    raw = top.take("sheet")
    sheet = _Fields({"size": raw} if isinstance(raw, str) else raw, "sheet", top.unit)
    size = sheet.take("size", None)
    if size is not None:
        named = size_named(size) if isinstance(size, str) else None
        if named is None:
            raise sheet.error("size", f"unknown sheet size {size!r}; want one of "
                              f"{', '.join(SIZES)}, or width and height")
        for key in ("width", "height"):
            if sheet.take(key, None) is not None:
                raise sheet.error(key, "give either a named size or width and height, not both")
        size, (width, height) = named
    else:
        width = sheet.length("width", _MISSING, positive=True)
        height = sheet.length("height", _MISSING, positive=True)
    orientation = sheet.take("orientation", None)
    if orientation is not None:
        orientation = sheet.choice("orientation", ("portrait", "landscape"))
    sheet.finish()
    if orientation:
        short, long = sorted((width, height))
        width, height = (short, long) if orientation == "portrait" else (long, short)
    return Sheet(width=width, height=height, size=size, orientation=orientation)


def _grid(top: _Fields, kind: Kind) -> Grid | None:
    raw = top.take("grid", {"cols": 2, "rows": 1} if kind.booklet else "auto")
    if raw == "auto":
        if kind.booklet:
            raise top.error("grid", f"a {kind.value} layout places a 2 x 1 spread; omit grid")
        return None
    grid = _Fields(raw, "grid")
    cols = grid.integer("cols", 1, _MAX_CELLS)
    rows = grid.integer("rows", 1, _MAX_CELLS)
    grid.finish()
    if kind.booklet and (cols, rows) != (2, 1):
        raise top.error("grid", f"a {kind.value} layout places a 2 x 1 spread (the fold "
                        f"between the columns); got {cols} x {rows}")
    return Grid(cols=cols, rows=rows)


def _margins(top: _Fields) -> Margins:
    raw = top.take("margins", 0.0)
    if isinstance(raw, (list, bool)):
        raise top.error("margins", f"want a length or an object of sides, got {raw!r}")
    if not isinstance(raw, dict):
        raw = {side: raw for side in ("top", "right", "bottom", "left")}
    margins = _Fields(raw, "margins", top.unit)
    values = {side: margins.length(side) for side in ("top", "right", "bottom", "left")}
    margins.finish()
    return Margins(**values)


def _gutter(top: _Fields) -> Gutter:
    raw = top.take("gutter", 0.0)
    gutter = _Fields(raw if isinstance(raw, dict) else {"x": raw, "y": raw}, "gutter", top.unit)
    value = Gutter(x=gutter.length("x"), y=gutter.length("y"))
    gutter.finish()
    return value


def _marks(top: _Fields) -> Marks | None:
    raw = top.take("marks", False)
    if raw is False:
        return None
    marks = _Fields({} if raw is True else raw, "marks", top.unit)
    value = Marks(length=marks.length("length", parse_length("5mm", "pt"), positive=True),
                  offset=marks.length("offset", parse_length("2mm", "pt")),
                  line_width=marks.length("line_width", 0.25, positive=True))
    marks.finish()
    return value


def _duplex(top: _Fields, kind: Kind) -> str:
    duplex = top.choice("duplex", DUPLEX, "work_and_turn" if kind.booklet else "none")
    if kind.booklet and duplex != "work_and_turn":
        raise top.error("duplex", f"a {kind.value} sheet is printed on both sides; "
                        "only work_and_turn applies")
    return duplex


def _pdftoolbox(top: _Fields) -> PdfToolbox:
    tool = _Fields(top.take("pdftoolbox", {}), "pdftoolbox")
    profile = tool.take("profile", None)
    if profile is not None and (not isinstance(profile, str) or not profile.strip()):
        raise tool.error("profile", f"want a profile name, got {profile!r}")
    raw = _Fields(tool.take("variables", {}), "pdftoolbox.variables")
    variables = {}
    for key, value in raw.data.items():
        raw.used.add(key)
        if not _VAR_RE.match(key):
            raise raw.error(key, "a variable name is letters, digits, '_', '.' or '-'")
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, (str, int, float)) or "\n" in str(value):
            raise raw.error(key, f"want a one-line string or a number, got {_kind(value)}")
        variables[key] = str(value)
    tool.finish()
    return PdfToolbox(profile=profile, variables=variables)


def _check(top: _Fields, layout: Layout) -> None:
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
