"""Read the input PDF: open it safely and measure every page's chosen box.

Anything wrong with the file becomes an InputPdfError that says why, so a
bad upload fails its job permanently instead of crashing the worker.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator
from pathlib import Path

import attrs
import pikepdf

from imposer.engine.budget import Budget
from imposer.engine.geometry import Rect
from imposer.engine.layout import PAGE_BOXES, Layout
from imposer.engine.units import MAX_LENGTH
from imposer.errors import InputPdfError

_NO_MEDIABOX = re.compile(r"object (\d+) (\d+)\b.*MediaBox is undefined")


@attrs.frozen(kw_only=True)
class SourcePage:
    """One input page as the engine sees it."""

    #: 0-based page index.
    index: int
    #: The chosen page box (TrimBox, or its fallback), in page space.
    box: Rect
    #: The MediaBox, in page space: the form's bounding box.
    media: Rect
    #: What the page offers around its box: BleedBox (or CropBox, or MediaBox) within
    #: the MediaBox, never less than the box; bleed drawn beyond it is clipped.
    bleed: Rect
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
def open_input(path: str | Path, budget: Budget) -> Iterator[pikepdf.Pdf]:
    """Open the input PDF within *budget*, turning every way it is unusable into InputPdfError."""
    try:
        budget.check_file(Path(path).stat().st_size)
        pdf = pikepdf.open(path)
    except pikepdf.PasswordError:
        raise InputPdfError("input PDF is encrypted and needs a password") from None
    except FileNotFoundError:
        raise InputPdfError(f"input PDF {str(path)!r} not found") from None
    except pikepdf.PikepdfError as exc:
        raise InputPdfError(f"input PDF is corrupt: {exc}") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise InputPdfError(f"input PDF cannot be read: {exc}") from None
    with pdf:
        try:
            if pdf.is_encrypted and not pdf.allow.print_highres:
                raise InputPdfError("input PDF is encrypted and does not permit printing")
            if len(pdf.pages) == 0:
                raise InputPdfError("input PDF has no pages")
            budget.check_document(pdf)
            yield pdf
        except (pikepdf.PikepdfError, RecursionError) as exc:
            raise InputPdfError(f"input PDF is corrupt: {exc}") from None


def inherited(page: pikepdf.Dictionary, key: str) -> pikepdf.Object | None:
    """Return a page attribute, looking up the page tree for inheritable ones.

    A form field's attributes (/FT, /Ff, /V) are inherited up the field tree the
    same way, through /Parent.
    """
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
    except (TypeError, ValueError, OverflowError):
        raise InputPdfError(f"{what} is not an array of four numbers") from None
    if not all(math.isfinite(v) and abs(v) <= 1e6 for v in (x0, y0, x1, y1)):
        raise InputPdfError(f"{what} has a coordinate beyond 1,000,000 pt")
    rect = Rect(x0=min(x0, x1), y0=min(y0, y1), x1=max(x0, x1), y1=max(y0, y1))
    if rect.width < 1 or rect.height < 1:
        raise InputPdfError(f"{what} is empty: {[x0, y0, x1, y1]}")
    return rect


def read_page(page: pikepdf.Dictionary, index: int, layout: Layout) -> SourcePage:
    """Measure one page; refuse what cannot be placed."""
    where = f"input page {index + 1}"
    try:
        media = inherited(page, "/MediaBox")
        if media is None:
            raise InputPdfError(f"{where} has no MediaBox")
        media_rect = _rect(media, f"{where} MediaBox")
        if max(media_rect.width, media_rect.height) > MAX_LENGTH:
            raise InputPdfError(
                f"{where} MediaBox is {media_rect.width:.0f} x {media_rect.height:.0f} pt; "
                f"PDF allows at most {MAX_LENGTH:.0f} pt (200 in) a side")
        box = _box(page, PAGE_BOXES[layout.page_box], media_rect, where)
        bleed = _box(page, PAGE_BOXES["BleedBox"], media_rect, where).union(box)
        rotate = inherited(page, "/Rotate")
        rotate = int(rotate) if rotate is not None else 0
        if rotate % 90:
            raise InputPdfError(f"{where} has /Rotate {rotate}; want a multiple of 90")
        unit = page.get("/UserUnit")
        if unit is not None and float(unit) != 1:
            raise InputPdfError(f"{where} uses /UserUnit {float(unit)}; not supported")
    except (pikepdf.PikepdfError, TypeError, ValueError, OverflowError) as exc:
        raise InputPdfError(f"{where} is malformed: {exc}") from None
    return SourcePage(index=index, box=box, media=media_rect, bleed=bleed.intersect(media_rect),
                      rotate=rotate % 360)


def _box(page: pikepdf.Dictionary, names: tuple[str, ...], media: Rect, where: str) -> Rect:
    """Return the first of *names* the page has, within its MediaBox."""
    for name in names:
        value = inherited(page, "/" + name) if name in ("CropBox", "MediaBox") else (
            page.get("/" + name))
        if value is not None:
            box = _rect(value, f"{where} {name}").intersect(media)
            if box.width < 1 or box.height < 1:
                raise InputPdfError(f"{where} {name} lies outside its MediaBox")
            return box
    return media


def read_pages(pdf: pikepdf.Pdf, layout: Layout) -> list[SourcePage]:
    """Measure every page; refuse a page whose MediaBox qpdf had to make up."""
    objs = [p.obj for p in pdf.pages]  # pdf.pages[i] walks the list: index it once
    objgens = {obj.objgen: i for i, obj in enumerate(objs)}
    for warning in pdf.get_warnings():
        found = _NO_MEDIABOX.search(str(warning))
        if found:
            number = objgens.get((int(found.group(1)), int(found.group(2))))
            which = f"input page {number + 1}" if number is not None else "an input page"
            raise InputPdfError(
                f"{which} has no valid MediaBox, so its size is unknown (the PDF standard requires "
                "one; the engine will not guess US Letter)")
    return [read_page(obj, i, layout) for i, obj in enumerate(objs)]
