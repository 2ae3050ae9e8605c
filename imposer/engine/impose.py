"""Impose an input PDF onto press sheets with pikepdf.

The steps, each its own module: open the input within the budget (source,
budget), measure its pages and decide each one's turn and scale (placement),
lay out the sheet (geometry) and the page order (order), check the size of
the job against the budget, flatten annotations and write the sheets
(document, writer), then carry the document's layers, output intent and
metadata over, keep only the PDF/A and PDF/X claims the plate meets
(standards), and save atomically.

Bad input raises only LayoutError, InputPdfError or TooLarge; an output that
cannot be written raises OSError.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path

import attrs
import pikepdf

from imposer.engine.appearances import Built
from imposer.engine.budget import Budget
from imposer.engine.document import carry_over, flatten_annotations
from imposer.engine.geometry import sheet_geometry
from imposer.engine.layout import Layout
from imposer.engine.order import plan, side_count, two_sided
from imposer.engine.placement import cell_size, fit_page
from imposer.engine.presets import load_layout
from imposer.engine.source import open_input, read_pages
from imposer.engine.standards import read_standards, revoke
from imposer.engine.writer import Writer, bleed_warnings
from imposer.errors import InputPdfError, TooLarge

logger = logging.getLogger(__name__)


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
    #: Things a prepress operator should know that did not stop the job, in words.
    warnings: tuple[str, ...] = ()
    #: Scale of each input page, in page order (1.0 unless ``fit`` changed it).
    scales: tuple[float, ...] = ()
    #: Input pages (1-based) turned 90 degrees to fit their cells.
    turned: tuple[int, ...] = ()


def impose(layout: Layout | str | dict, in_path: str | Path, out_path: str | Path, *,
           slug_fields: Mapping[str, str] | None = None,
           budget: Budget | None = None) -> ImposeSummary:
    """Impose *in_path* by *layout* into *out_path*; bad input raises only our errors.

    *layout* is a Layout, or anything ``load_layout`` accepts. *slug_fields*
    fills the slug line's ``{job_id}`` and ``{tenant_id}``. *budget* bounds
    the job (default ``Budget()``); over it, TooLarge is raised before any work.
    """
    started = time.monotonic()
    layout = load_layout(layout)
    budget = budget or Budget()
    try:
        return _impose(layout, Path(in_path), Path(out_path), dict(slug_fields or {}),
                       budget, started)
    except RecursionError:
        raise InputPdfError("input PDF nests objects too deeply") from None
    except MemoryError:
        raise TooLarge("the imposition ran out of memory") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        # pikepdf raises these for objects of the wrong type deep in a malformed file
        logger.warning("malformed input PDF: %s", exc, exc_info=True,
                       extra={"action": "engine_malformed_input"})
        raise InputPdfError(f"input PDF is malformed: {type(exc).__name__}: {exc}") from None


def _impose(layout: Layout, in_path: Path, out_path: Path, slug_fields: dict[str, str],
            budget: Budget, started: float) -> ImposeSummary:
    with open_input(in_path, budget) as src, pikepdf.new() as out:
        pages = read_pages(src, layout)
        cell_w, cell_h = cell_size(layout, pages[0])
        fits = [fit_page(layout, page, cell_w, cell_h) for page in pages]
        geometry = sheet_geometry(layout, cell_w, cell_h)
        cells = geometry.grid.cols * geometry.grid.rows
        count = side_count(layout, len(pages), geometry.grid)
        budget.check_layout(geometry.width * geometry.height, count, count * cells)
        sides = plan(layout, len(pages), geometry.grid)
        warnings: list[str] = []
        standards = read_standards(src)
        built = flatten_annotations(src) if layout.annotations == "flatten" else Built()
        warnings += built.warnings
        sheets = len(sides) // 2 if two_sided(layout) else len(sides)
        writer = Writer(src, out, layout, geometry, pages, fits, budget, slug_fields,
                        standards.process or "/DeviceCMYK")
        writer.write(sides, sheets)
        warnings += bleed_warnings(layout, writer.short_bleed)
        warnings += carry_over(src, out)
        warnings += revoke(out, standards, standards.broken(
            src.pdf_version, built.transparent, layout.marks is not None))
        _save(out, out_path, src.pdf_version, standards.object_streams)
    placed = sum(p is not None for side in sides for p in side)
    return ImposeSummary(
        sheets=sheets, sheet_width=geometry.width, sheet_height=geometry.height,
        sides=len(sides), input_pages=len(pages), pages_placed=placed,
        blank_cells=sum(len(side) for side in sides) - placed,
        seconds=time.monotonic() - started, warnings=tuple(warnings),
        scales=tuple(f.scale for f in fits),
        turned=tuple(i + 1 for i, f in enumerate(fits) if f.turn))


def _save(out: pikepdf.Pdf, path: Path, version: str, object_streams: bool) -> None:
    """Write the sheets beside *path*, then rename, so no half-written plate is left.

    Streams are copied as they are (never decoded and recompressed): faster, and a
    stream that would expand past the budget is never expanded here. Object
    streams (PDF 1.5) make the plate smaller, unless a standard the source claims
    predates them: then the plate keeps the source's version and a classic xref table.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    mode = pikepdf.ObjectStreamMode.generate if object_streams \
        else pikepdf.ObjectStreamMode.disable
    try:
        with open(tmp, "wb") as stream:  # an unwritable output is OSError, not bad input
            out.save(stream, compress_streams=True, min_version=version,
                     stream_decode_level=pikepdf.StreamDecodeLevel.none,
                     object_stream_mode=mode)
        os.replace(tmp, path)
    except pikepdf.PikepdfError as exc:  # source objects are read lazily, at write time
        raise InputPdfError(f"input PDF is corrupt: {exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
