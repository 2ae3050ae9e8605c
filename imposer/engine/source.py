"""Read the input PDF: open it safely and measure every page's chosen box.

Anything wrong with the file becomes an InputPdfError that says why, so a
bad upload fails its job permanently instead of crashing the worker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import attrs
import pikepdf

from imposer.engine.geometry import Rect
from imposer.engine.layout import PAGE_BOXES, Layout
from imposer.engine.spec import show
from imposer.errors import InputPdfError

#: Pages whose sizes differ by less than this (points) count as the same size.
SIZE_TOLERANCE = 0.5


@attrs.frozen(kw_only=True)
class SourcePage:
    """One input page as the engine sees it."""

    #: 0-based page index.
    index: int
    #: The chosen page box (TrimBox, or its fallback), in page space.
    box: Rect
    #: The MediaBox, in page space: the form's bounding box.
    media: Rect
    #: /Rotate normalised to 0, 90, 180 or 270 (clockwise).
    rotate: int

    @property
    def width(self) -> float:
        """Width as displayed (after /Rotate)."""
        return self.box.height if self.rotate in (90, 270) else self.box.width

    @property
    def height(self) -> float:
        return self.box.width if self.rotate in (90, 270) else self.box.height


@contextlib.contextmanager
def open_input(path: str | Path) -> Iterator[pikepdf.Pdf]:
    """Open the input PDF, turning every way it can be unusable into InputPdfError."""
    try:
        pdf = pikepdf.open(path)
    except pikepdf.PasswordError:
        raise InputPdfError("input PDF is encrypted and needs a password") from None
    except FileNotFoundError:
        raise InputPdfError(f"input PDF {str(path)!r} not found") from None
    except pikepdf.PikepdfError as exc:
        raise InputPdfError(f"input PDF is corrupt: {exc}") from None
    except OSError as exc:
        raise InputPdfError(f"input PDF cannot be read: {exc}") from None
    with pdf:
        try:
            if pdf.is_encrypted and not pdf.allow.print_highres:
                raise InputPdfError("input PDF is encrypted and does not permit printing")
            if len(pdf.pages) == 0:
                raise InputPdfError("input PDF has no pages")
            yield pdf
        except pikepdf.PikepdfError as exc:
            raise InputPdfError(f"input PDF is corrupt: {exc}") from None


def inherited(page: pikepdf.Dictionary, key: str) -> pikepdf.Object | None:
    """Return a page attribute, looking up the page tree for inheritable ones."""
    node = page
    for _ in range(64):
        if key in node:
            return node[key]
        node = node.get("/Parent")
        if not isinstance(node, pikepdf.Dictionary):
            return None
    return None


def _rect(value: pikepdf.Object, what: str) -> Rect:
    if not isinstance(value, pikepdf.Array) or len(value) != 4:
        raise InputPdfError(f"{what} is not an array of four numbers")
    try:
        x0, y0, x1, y1 = (float(v) for v in value)
    except (TypeError, ValueError):
        raise InputPdfError(f"{what} is not an array of four numbers") from None
    rect = Rect(x0=min(x0, x1), y0=min(y0, y1), x1=max(x0, x1), y1=max(y0, y1))
    if rect.width < 1 or rect.height < 1:
        raise InputPdfError(f"{what} is empty: {[x0, y0, x1, y1]}")
    return rect


def read_page(pdf: pikepdf.Pdf, index: int, layout: Layout) -> SourcePage:
    """Measure one page; refuse what cannot be placed."""
    where = f"input page {index + 1}"
    try:
        page = pdf.pages[index].obj
        media = inherited(page, "/MediaBox")
        if media is None:
            raise InputPdfError(f"{where} has no MediaBox")
        media_rect = _rect(media, f"{where} MediaBox")
        for name in PAGE_BOXES[layout.page_box]:
            value = inherited(page, "/" + name) if name in ("CropBox", "MediaBox") else (
                page.get("/" + name))
            if value is not None:
                box = _rect(value, f"{where} {name}").intersect(media_rect)
                if box.width < 1 or box.height < 1:
                    raise InputPdfError(f"{where} {name} lies outside its MediaBox")
                break
        rotate = inherited(page, "/Rotate")
        rotate = int(rotate) if rotate is not None else 0
        if rotate % 90:
            raise InputPdfError(f"{where} has /Rotate {rotate}; want a multiple of 90")
        unit = page.get("/UserUnit")
        if unit is not None and float(unit) != 1:
            raise InputPdfError(f"{where} uses /UserUnit {float(unit)}; not supported")
    except (pikepdf.PikepdfError, TypeError, ValueError) as exc:
        raise InputPdfError(f"{where} is malformed: {exc}") from None
    return SourcePage(index=index, box=box, media=media_rect, rotate=rotate % 360)


def read_pages(pdf: pikepdf.Pdf, layout: Layout) -> list[SourcePage]:
    """Measure every page and apply the layout's rule for mixed page sizes."""
    pages = [read_page(pdf, i, layout) for i in range(len(pdf.pages))]
    first = pages[0]
    if layout.mixed_sizes == "refuse":
        for page in pages[1:]:
            if abs(page.width - first.width) > SIZE_TOLERANCE or \
                    abs(page.height - first.height) > SIZE_TOLERANCE:
                raise InputPdfError(
                    f"input page {page.index + 1} is {show(page.width)} x {show(page.height)} "
                    f"but page 1 is {show(first.width)} x {show(first.height)}; mixed page "
                    f"sizes are refused (set \"mixed_sizes\": \"center\" to centre each page "
                    f"in a cell of page 1's size)")
    return pages
