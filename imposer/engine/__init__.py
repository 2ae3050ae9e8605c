"""The open imposition engine: place PDF pages on press sheets with pikepdf.

It stands in for the licensed pdfToolbox, driven by the same layout spec::

    layout = load_layout("a5-booklet-a4")    # preset name, JSON file or dict
    summary = impose(layout, "in.pdf", "out.pdf", slug_fields={"job_id": ..., "tenant_id": ...},
                     budget=Budget())
    summary.warnings                         # what the operator should know, in words

Bad input raises only LayoutError, InputPdfError or TooLarge.
"""

from __future__ import annotations

from imposer.engine.budget import Budget
from imposer.engine.impose import ImposeSummary, impose
from imposer.engine.layout import Kind, Layout
from imposer.engine.presets import list_presets, load_layout

__all__ = ["Budget", "ImposeSummary", "Kind", "Layout", "impose", "list_presets", "load_layout"]
