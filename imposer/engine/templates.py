"""Placeholders of pdfToolbox variable templates, filled from a layout.

``{bleed_mm}`` and the rest let one spec drive both engines: the wrapper passes
each filled template as ``--setvariable=NAME:VALUE``. The values come from
the layout itself (``engine.layout.template_values``); here is which names a spec
may use and how a template is read.
"""

from __future__ import annotations

import string

from imposer.engine.layout import Grid, Kind, Layout, Sheet, template_values


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
