"""Appearance streams for annotations that carry only their geometry, so they print.

A viewer draws a highlight, an ink stroke or an empty form field's border from
the annotation's own entries when it has no appearance stream (/AP); a press
sheet made by flattening prints appearance streams only, so such an annotation
would vanish without a word. Before flattening, each printable annotation that
lacks one gets it here, built from its geometry (/QuadPoints, /InkList, /L,
/Vertices, /Rect), its colour (/C, /IC), border (/BS) and opacity (/CA); a form
field gets its border and background (/MK) and, for a check box or radio
button, its mark. A field's value is left to qpdf, which writes the text into
the ``/Tx BMC ... EMC`` section of the stream made here. An annotation that
cannot be drawn faithfully (a note icon, free text, a named stamp) is named in a
warning instead.
"""

from __future__ import annotations

import math

import attrs
import pikepdf
from pikepdf import Name

from imposer.engine.drawing import (border_of, colour, ellipse, form_xobject, number_or, numbers,
                                    path, rect_of)
from imposer.engine.widgets import widget
from imposer.engine.marks import num
from imposer.engine.source import inherited

#: Annotation flags (PDF 32000 table 165).
HIDDEN, PRINT = 2, 4
#: Kinds never printed or drawn by a viewer from nothing: nothing to build, nothing to say.
_SILENT = {"/Link", "/Popup"}
#: Most annotations named one by one in the warnings; the rest are counted.
MAX_NAMED = 10


@attrs.frozen(kw_only=True)
class Built:
    """What building the missing appearances did to one document."""

    #: Appearances built, one per annotation.
    count: int = 0
    #: Whether any built appearance uses transparency (an opacity or a blend mode).
    transparent: bool = False
    #: Annotations left unprinted, in words, for the job's warnings.
    warnings: tuple[str, ...] = ()


def build_missing(pdf: pikepdf.Pdf) -> Built:
    """Give every printable annotation without an appearance stream one; say what was left."""
    form = pdf.Root.get("/AcroForm")
    form = form if isinstance(form, pikepdf.Dictionary) else pikepdf.Dictionary()
    count, transparent, skipped = 0, False, []
    for number, page in enumerate(pdf.pages, start=1):
        annots = page.obj.get("/Annots")
        if not isinstance(annots, pikepdf.Array):
            continue
        for position, annot in enumerate(annots, start=1):
            if not isinstance(annot, pikepdf.Dictionary) or not _printable(annot) \
                    or _has_appearance(annot) or _settle_state(annot):
                continue
            kind = annot.get("/Subtype")
            subtype = str(kind) if isinstance(kind, Name) else "/Unknown"
            if subtype in _SILENT:
                continue
            builder = _BUILDERS.get(subtype)
            result = builder(pdf, annot, form) if builder else None
            if result is None:
                skipped.append(f"page {number} annotation {position} ({subtype[1:]}"
                               f"{_named(annot)})")
                continue
            count += 1
            transparent = transparent or result
    return Built(count=count, transparent=transparent, warnings=_say(skipped))


def _say(skipped: list[str]) -> tuple[str, ...]:
    if not skipped:
        return ()
    named = ", ".join(skipped[:MAX_NAMED])
    more = f" and {len(skipped) - MAX_NAMED} more" if len(skipped) > MAX_NAMED else ""
    return (f"{'annotations' if len(skipped) > 1 else 'annotation'} without an appearance "
            f"stream {'are' if len(skipped) > 1 else 'is'} not printed (the engine cannot draw "
            f"{'them' if len(skipped) > 1 else 'it'} faithfully): {named}{more}",)


def _named(annot: pikepdf.Dictionary) -> str:
    name = annot.get("/NM", annot.get("/T"))
    if not isinstance(name, pikepdf.String):
        return ""
    text = str(name).replace("\n", " ")
    return f" '{text[:40]}'"


def _printable(annot: pikepdf.Dictionary) -> bool:
    flags = annot.get("/F", 0)
    flags = int(flags) if isinstance(flags, int) else 0
    return bool(flags & PRINT) and not flags & HIDDEN


def _has_appearance(annot: pikepdf.Dictionary) -> bool:
    """Say whether the annotation has a normal appearance a flattener can draw."""
    ap = annot.get("/AP")
    normal = ap.get("/N") if isinstance(ap, pikepdf.Dictionary) else None
    if isinstance(normal, pikepdf.Stream):
        return True
    if isinstance(normal, pikepdf.Dictionary):
        state = annot.get("/AS")
        return isinstance(state, Name) and isinstance(normal.get(str(state)), pikepdf.Stream)
    return False


def _settle_state(annot: pikepdf.Dictionary) -> bool:
    """Pick the state of a button that has appearances per state but no /AS, from its value.

    Return whether the annotation can now be drawn from its own appearances.
    """
    ap = annot.get("/AP")
    normal = ap.get("/N") if isinstance(ap, pikepdf.Dictionary) else None
    if not isinstance(normal, pikepdf.Dictionary) or isinstance(annot.get("/AS"), Name):
        return False
    value = inherited(annot, "/V")
    state = str(value) if isinstance(value, Name) and str(value) in normal else "/Off"
    if not isinstance(normal.get(state), pikepdf.Stream):
        return False
    annot.AS = Name(state)
    return True


def _opacity(annot: pikepdf.Dictionary, blend: str | None) -> tuple[pikepdf.Dictionary, bool]:
    """Return resources with graphics state /A for the annotation's opacity and blend mode."""
    alpha = min(1.0, max(0.0, number_or(annot.get("/CA"), 1.0)))
    if alpha >= 1 and blend is None:
        return pikepdf.Dictionary(), False
    state = pikepdf.Dictionary(Type=Name.ExtGState, CA=alpha, ca=alpha)
    if blend is not None:
        state.BM = Name(blend)
    return pikepdf.Dictionary(ExtGState=pikepdf.Dictionary(A=state)), True


def _markup(pdf: pikepdf.Pdf, annot: pikepdf.Dictionary, ops: list[str],
            points: list[tuple[float, float]], reach: float, blend: str | None = None) -> bool:
    """Give *annot* a page-space appearance drawing *ops*; return whether it is transparent.

    Its box (and the annotation's /Rect) grows to cover *points* plus *reach*, so a
    stroke's width is never clipped.
    """
    rect = rect_of(annot)
    xs = [p[0] for p in points] + ([rect[0], rect[2]] if rect else [])
    ys = [p[1] for p in points] + ([rect[1], rect[3]] if rect else [])
    box = (min(xs) - reach, min(ys) - reach, max(xs) + reach, max(ys) + reach)
    resources, transparent = _opacity(annot, blend)
    if transparent:
        ops = ["/A gs", *ops]
    # BBox and Rect are the same page-space box, so the appearance lands where it was drawn
    annot.Rect = list(box)
    annot.AP = pikepdf.Dictionary(N=form_xobject(pdf, ["q", *ops, "Q"], box, resources))
    return transparent


def _quads(annot: pikepdf.Dictionary) -> list[list[tuple[float, float]]]:
    """Return each quadrilateral of /QuadPoints, its corners in order around it."""
    values = numbers(annot.get("/QuadPoints"))
    quads = []
    for i in range(0, len(values) - 7, 8):
        corners = [(values[i + j], values[i + j + 1]) for j in range(0, 8, 2)]
        cx, cy = sum(p[0] for p in corners) / 4, sum(p[1] for p in corners) / 4
        # writers disagree on the corner order (the standard's or Acrobat's): sort by angle
        quads.append(sorted(corners, key=lambda p: math.atan2(p[1] - cy, p[0] - cx)))
    return quads


def _bottom_edge(quad: list[tuple[float, float]]
                 ) -> tuple[tuple[float, float], tuple[float, float], float]:
    """Return the quad's lower edge (left and right ends) and its height, for decorations."""
    by_height = sorted(quad, key=lambda p: p[1])
    left, right = sorted(by_height[:2])
    height = (by_height[2][1] + by_height[3][1] - left[1] - right[1]) / 2
    return left, right, height


def _highlight(pdf, annot, form) -> bool | None:
    quads, fill = _quads(annot), colour(annot.get("/C"), stroke=False)
    if not quads or fill is None:
        return None
    ops = [fill] + [path(q, close=True) + " f" for q in quads]
    # multiply, as viewers do: the marker colours the text under it instead of hiding it
    return _markup(pdf, annot, ops, [p for q in quads for p in q], 0.0, blend="/Multiply")


def _text_line(where: float, wavy: bool = False):
    """Build Underline (where 0), StrikeOut (0.5) or Squiggly (wavy) from the quads."""
    def build(pdf, annot, form) -> bool | None:
        quads, stroke = _quads(annot), colour(annot.get("/C"), stroke=True)
        if not quads or stroke is None:
            return None
        ops, points = [stroke], []
        for quad in quads:
            left, right, height = _bottom_edge(quad)
            width = max(0.5, abs(height) / 14)
            lift = height * where + (width if not where else 0.0)
            a, b = (left[0], left[1] + lift), (right[0], right[1] + lift)
            if wavy:
                steps = max(1, int(math.hypot(b[0] - a[0], b[1] - a[1]) / (2 * width)))
                line = [(a[0] + (b[0] - a[0]) * i / steps,
                         a[1] + (b[1] - a[1]) * i / steps + (width if i % 2 else -width))
                        for i in range(steps + 1)]
            else:
                line = [a, b]
            ops.append(f"{num(width)} w {path(line)} S")
            points += line
        return _markup(pdf, annot, ops, points, 2.0)
    return build


def _ink(pdf, annot, form) -> bool | None:
    stroke = colour(annot.get("/C"), stroke=True)
    strokes = annot.get("/InkList")
    paths = [numbers(s) for s in strokes] if isinstance(strokes, pikepdf.Array) else []
    paths = [[(p[i], p[i + 1]) for i in range(0, len(p) - 1, 2)] for p in paths]
    paths = [p for p in paths if p]
    width, dash = border_of(annot)
    if not paths or stroke is None or width == 0:
        return None
    ops = [stroke, f"{num(width)} w 1 J 1 j", dash]
    ops += [path(p if len(p) > 1 else p * 2) + " S" for p in paths]
    return _markup(pdf, annot, ops, [pt for p in paths for pt in p], width)


def _shape(oval: bool):
    """Build Square or Circle: /Rect less half the border (and /RD), stroked /C, filled /IC."""
    def build(pdf, annot, form) -> bool | None:
        rect = rect_of(annot)
        stroke, fill = colour(annot.get("/C"), stroke=True), colour(annot.get("/IC"),
                                                                     stroke=False)
        width, dash = border_of(annot)
        if rect is None or (fill is None and (stroke is None or width == 0)):
            return None
        rd = numbers(annot.get("/RD"))
        rd = rd if len(rd) == 4 else [0.0] * 4
        half = width / 2 if stroke else 0.0
        x0, y0 = rect[0] + rd[0] + half, rect[1] + rd[3] + half
        x1, y1 = rect[2] - rd[2] - half, rect[3] - rd[1] - half
        if x1 <= x0 or y1 <= y0:
            return None
        paint = "B" if fill and stroke and width else ("f" if fill else "S")
        ops = [op for op in (stroke, fill) if op] + [f"{num(width)} w", dash]
        if oval:
            ops.append(ellipse(x0, y0, x1, y1) + f" {paint}")
        else:
            ops.append(f"{num(x0)} {num(y0)} {num(x1 - x0)} {num(y1 - y0)} re {paint}")
        return _markup(pdf, annot, ops, [(x0, y0), (x1, y1)], half)
    return build


def _ends_plain(annot: pikepdf.Dictionary) -> bool:
    ends = annot.get("/LE")
    return not isinstance(ends, pikepdf.Array) or all(e == Name("/None") for e in ends)


def _line(pdf, annot, form) -> bool | None:
    points = numbers(annot.get("/L"))
    stroke = colour(annot.get("/C"), stroke=True)
    width, dash = border_of(annot)
    if len(points) != 4 or stroke is None or width == 0 or not _ends_plain(annot) \
            or "/LL" in annot:  # arrow heads and dimension leaders are not drawn here
        return None
    line = [(points[0], points[1]), (points[2], points[3])]
    return _markup(pdf, annot, [stroke, f"{num(width)} w", dash, path(line) + " S"], line,
                   width)


def _poly(closed: bool):
    """Build Polygon (closed, filled with /IC) or PolyLine from /Vertices."""
    def build(pdf, annot, form) -> bool | None:
        values = numbers(annot.get("/Vertices"))
        points = [(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        stroke = colour(annot.get("/C"), stroke=True)
        fill = colour(annot.get("/IC"), stroke=False) if closed else None
        width, dash = border_of(annot)
        if len(points) < 2 or (stroke is None and fill is None) \
                or (not closed and not _ends_plain(annot)):
            return None
        paint = "b" if fill and stroke else ("f" if fill else ("s" if closed else "S"))
        ops = [op for op in (stroke, fill) if op] + [f"{num(width)} w 1 j", dash,
                                                     f"{path(points)} {paint}"]
        return _markup(pdf, annot, ops, points, width)
    return build


_BUILDERS = {
    "/Highlight": _highlight, "/Underline": _text_line(0.0),
    "/StrikeOut": _text_line(0.5), "/Squiggly": _text_line(0.0, wavy=True),
    "/Ink": _ink, "/Square": _shape(False), "/Circle": _shape(True), "/Line": _line,
    "/Polygon": _poly(True), "/PolyLine": _poly(False), "/Widget": widget,
}
