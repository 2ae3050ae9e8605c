"""The layout specification: what to impose, on which sheet, and how.

One spec drives both engines: this package places pages itself, and the
pdfToolbox wrapper turns the same spec into a profile name and
``--setvariable`` values. Lengths are stored in PDF points; the parser in
:mod:`imposer.engine.spec` converts whatever unit the JSON used.
"""

from __future__ import annotations

import enum
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
DUPLEX = ("none", "work_and_turn", "work_and_tumble")
MIXED_SIZES = ("refuse", "center")
FITS = ("none", "shrink", "fit")
ANNOTATIONS = ("flatten", "drop")
#: The slug line when ``marks.slug`` is true; placeholders are SLUG_NAMES.
DEFAULT_SLUG = "{job_id}  {tenant_id}  {layout}  sheet {sheet} of {sheets}  {side}"
#: Placeholders a slug template may use (job_id and tenant_id come from the caller).
SLUG_NAMES = ("job_id", "tenant_id", "layout", "sheet", "sheets", "side", "pages")


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
    """Printer's marks drawn around the imposed block, outside its bleed."""

    #: Length of each crop mark line, and the size of a colour patch or target, points.
    length: float
    #: Gap between the bleed edge and the crop marks, and between mark bands, points.
    offset: float
    #: Stroke width, points.
    line_width: float
    #: Crop marks on every cut line, dashed fold marks on a booklet's fold.
    crop: bool = True
    #: Registration targets at the four corners, in the band beyond the crop marks.
    registration: bool = False
    #: A row of colour patches under the block, in the band beyond the crop marks.
    colour_bar: bool = False
    #: Slug line template printed above the block, or None for no slug.
    slug: str | None = None

    @property
    def outer_band(self) -> bool:
        """Say whether anything is drawn in the band beyond the crop marks."""
        return self.registration or self.colour_bar or self.slug is not None


@attrs.frozen(kw_only=True)
class CellSize:
    """A fixed trim size for every cell, instead of page 1's size."""

    width: float
    height: float


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
    #: "none", "work_and_turn" (backs mirrored left-right) or "work_and_tumble"
    #: (backs mirrored top-bottom, pages turned 180 degrees).
    duplex: str = "none"
    #: Sheets per signature (perfect binding only).
    signature_sheets: int | None = None
    #: "refuse" pages that differ from page 1, or "center" them in page 1's cell.
    mixed_sizes: str = "refuse"
    #: Trim size of every cell, or None for page 1's size.
    cell: CellSize | None = None
    #: "none" (scale 1), "shrink" (only pages larger than the cell) or "fit" (every page).
    fit: str = "none"
    #: Turn a page 90 degrees anticlockwise when its orientation differs from the cell's.
    rotate_to_fit: bool = False
    #: Paper thickness for creep compensation (booklets), points; 0 for none.
    creep: float = 0.0
    #: "flatten" annotations' print appearances into the page, or "drop" them.
    annotations: str = "flatten"
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
            "cell": attrs.asdict(self.cell) if self.cell else None,
            "fit": self.fit,
            "rotate_to_fit": self.rotate_to_fit,
            "creep": self.creep if self.kind.booklet else None,
            "annotations": self.annotations,
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
