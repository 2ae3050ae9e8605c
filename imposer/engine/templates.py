"""Placeholders of pdfToolbox variable templates, filled from a layout.

``{bleed_mm}`` and the rest let one spec drive both engines: the wrapper passes
each filled template as ``--setvariable=NAME:VALUE``.
"""

from __future__ import annotations

import string

from imposer.engine.layout import Grid, Kind, Layout, Sheet
from imposer.engine.units import fmt, mm


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
