"""The layout specification: what to impose, on which sheet, and how.

One spec drives both engines: this package places pages itself, and the
pdfToolbox wrapper turns the same spec into a profile name and
``--setvariable`` values. Lengths are stored in PDF points; the parser in
:mod:`imposer.engine.spec` converts whatever unit the JSON used.
"""

from __future__ import annotations

import enum
import string
from typing import Any

import attrs

from imposer.engine.units import fmt, mm


class Kind(str, enum.Enum):
    """How pages are laid out on sheets."""

    #: One page repeated to fill the sheet (labels, cards); one sheet side per page.
    STEP_REPEAT = "step_repeat"
    #: Consecutive pages in reading order.
    NUP = "nup"
    #: Folded sheets nested into one booklet that reads 1..N.
    SADDLE = "saddle"
    #: Signatures of K nested sheets, folded and gathered.
    PERFECT = "perfect"

    @property
    def booklet(self) -> bool:
        return self in (Kind.SADDLE, Kind.PERFECT)


#: Page boxes a spec may ask for, each followed by its fallbacks.
PAGE_BOXES = {
    "TrimBox": ("TrimBox", "CropBox", "MediaBox"),
    "BleedBox": ("BleedBox", "CropBox", "MediaBox"),
    "ArtBox": ("ArtBox", "CropBox", "MediaBox"),
    "CropBox": ("CropBox", "MediaBox"),
    "MediaBox": ("MediaBox",),
}
DUPLEX = ("none", "work_and_turn")
MIXED_SIZES = ("refuse", "center")


@attrs.frozen(kw_only=True)
class Sheet:
    """The press sheet; width and height are already turned to the orientation."""

    #: Points.
    width: float
    #: Points.
    height: float
    #: Named size it came from ("SRA3"), or None for an explicit size.
    size: str | None = None
    #: "portrait", "landscape" or None (as given).
    orientation: str | None = None

    @property
    def label(self) -> str:
        """Say what the sheet is, for people: ``SRA3 landscape (450 x 320 mm)``."""
        dims = f"{fmt(mm(self.width), 1)} x {fmt(mm(self.height), 1)} mm"
        name = " ".join(p for p in (self.size, self.orientation) if p)
        return f"{name} ({dims})" if name else dims


@attrs.frozen(kw_only=True)
class Grid:
    """Cells across and down."""

    cols: int
    rows: int


@attrs.frozen(kw_only=True)
class Margins:
    """Unprintable border of the sheet, points; bleed and marks stay inside it."""

    top: float = 0.0
    right: float = 0.0
    bottom: float = 0.0
    left: float = 0.0


@attrs.frozen(kw_only=True)
class Gutter:
    """Space between trims of neighbouring cells, points."""

    #: Between columns.
    x: float = 0.0
    #: Between rows.
    y: float = 0.0


@attrs.frozen(kw_only=True)
class Marks:
    """Crop marks drawn around the imposed block, outside its bleed."""

    #: Length of each mark line, points.
    length: float
    #: Gap between the bleed edge and the start of the mark, points.
    offset: float
    #: Stroke width, points.
    line_width: float


@attrs.frozen(kw_only=True)
class PdfToolbox:
    """How the pdfToolbox wrapper runs the same layout."""

    #: Profile (.kfpx) name or path.
    profile: str | None = None
    #: Variable name -> value template; ``{bleed_mm}`` etc. are filled from the layout.
    variables: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Layout:
    """A validated layout specification (build it with ``load_layout``)."""

    VERSION = 1

    #: Preset or spec name, if it has one.
    name: str | None = None
    description: str | None = None
    kind: Kind
    sheet: Sheet
    #: Fixed grid, or None to fit as many cells as the sheet holds.
    grid: Grid | None
    margins: Margins = Margins()
    gutter: Gutter = Gutter()
    #: Bleed kept around each page's trim, points.
    bleed: float = 0.0
    #: Page box placed: a key of PAGE_BOXES.
    page_box: str = "TrimBox"
    marks: Marks | None = None
    #: "none" or "work_and_turn" (backs mirrored left-right so they align).
    duplex: str = "none"
    #: Sheets per signature (perfect binding only).
    signature_sheets: int | None = None
    #: "refuse" pages that differ from page 1, or "center" them in page 1's cell.
    mixed_sizes: str = "refuse"
    pdftoolbox: PdfToolbox = PdfToolbox()

    @property
    def pdftoolbox_profile(self) -> str | None:
        return self.pdftoolbox.profile

    @property
    def pdftoolbox_variables(self) -> dict[str, str]:
        """Return the pdfToolbox variables with their ``{placeholders}`` filled in."""
        values = template_values(self)
        return {k: v.format_map(values) for k, v in self.pdftoolbox.variables.items()}

    def to_dict(self) -> dict[str, Any]:
        """Return the spec as JSON-ready data, in points; ``load_layout`` reads it back."""
        sheet: dict[str, Any] = (
            {"size": self.sheet.size} if self.sheet.size
            else {"width": self.sheet.width, "height": self.sheet.height})
        if self.sheet.orientation:
            sheet["orientation"] = self.sheet.orientation
        data: dict[str, Any] = {
            "version": self.VERSION,
            "name": self.name,
            "description": self.description,
            "kind": self.kind.value,
            "units": "pt",
            "sheet": sheet,
            "grid": attrs.asdict(self.grid) if self.grid else "auto",
            "margins": attrs.asdict(self.margins),
            "gutter": attrs.asdict(self.gutter),
            "bleed": self.bleed,
            "page_box": self.page_box,
            "marks": attrs.asdict(self.marks) if self.marks else False,
            "duplex": self.duplex,
            "signature_sheets": self.signature_sheets,
            "mixed_sizes": self.mixed_sizes,
        }
        if self.pdftoolbox != PdfToolbox():
            data["pdftoolbox"] = attrs.asdict(self.pdftoolbox)
        return {k: v for k, v in data.items() if v is not None}


def template_values(layout: Layout) -> dict[str, str]:
    """Return the values a pdfToolbox variable template may use, as strings."""
    s, g, m = layout.sheet, layout.grid, layout.margins
    values = {
        "name": layout.name or "",
        "kind": layout.kind.value,
        "duplex": layout.duplex,
        "page_box": layout.page_box,
        "sheet": s.size or "custom",
        "orientation": "landscape" if s.width > s.height else "portrait",
        "sheet_width_mm": fmt(mm(s.width)),
        "sheet_height_mm": fmt(mm(s.height)),
        "sheet_width_pt": fmt(s.width),
        "sheet_height_pt": fmt(s.height),
        "bleed_mm": fmt(mm(layout.bleed)),
        "bleed_pt": fmt(layout.bleed),
        "gutter_x_mm": fmt(mm(layout.gutter.x)),
        "gutter_y_mm": fmt(mm(layout.gutter.y)),
        "margin_top_mm": fmt(mm(m.top)),
        "margin_right_mm": fmt(mm(m.right)),
        "margin_bottom_mm": fmt(mm(m.bottom)),
        "margin_left_mm": fmt(mm(m.left)),
        "marks": "true" if layout.marks else "false",
        "signature_sheets": str(layout.signature_sheets or ""),
    }
    if g is not None:
        values.update(cols=str(g.cols), rows=str(g.rows))
    return values


#: Every placeholder a template may name (cols and rows need a fixed grid).
TEMPLATE_NAMES = frozenset(template_values(Layout(
    kind=Kind.NUP, sheet=Sheet(width=1, height=1), grid=Grid(cols=1, rows=1))))


def template_fields(template: str) -> list[str]:
    """Return the placeholder names in *template*; raise ValueError if it is malformed."""
    names = []
    for _, field, spec, conversion in string.Formatter().parse(template):
        if field is None:
            continue
        if spec or conversion or not field.isidentifier():
            raise ValueError(f"placeholder {{{field}}} must be a bare name like {{bleed_mm}}")
        names.append(field)
    return names
