"""The open imposition engine: place PDF pages on press sheets with pikepdf.

It stands in for the licensed pdfToolbox, driven by the same layout spec::

    layout = load_layout("a5-booklet-a4")    # preset name, JSON file or dict
    summary = impose(layout, "in.pdf", "out.pdf")
"""

from __future__ import annotations

from imposer.engine.impose import ImposeSummary, impose
from imposer.engine.layout import Kind, Layout
from imposer.engine.presets import list_presets, load_layout

__all__ = ["ImposeSummary", "Kind", "Layout", "impose", "list_presets", "load_layout"]
