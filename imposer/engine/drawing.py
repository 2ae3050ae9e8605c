"""Drawing primitives for appearance streams, read from an annotation's own entries.

Numbers, colours (/C, /IC), borders (/BS, /Border) and the /Rect of an
annotation, read defensively (a malformed entry reads as absent), and the paths
and form XObjects the appearance builders (``appearances``, ``fields``) draw with.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pikepdf
from pikepdf import Name

from imposer.engine.marks import num

#: Bezier handle length for a quarter circle of radius 1.
_KAPPA = 4 * (math.sqrt(2) - 1) / 3


def numbers(value: object) -> list[float]:
    """Return a PDF array of numbers as floats; [] if it is not one, or not all finite."""
    if not isinstance(value, pikepdf.Array):
        return []
    try:
        found = [float(v) for v in value]
    except (TypeError, ValueError):
        return []
    return found if all(math.isfinite(v) for v in found) else []


def colour(value: object, stroke: bool) -> str | None:
    """Return the operator setting a /C or /IC colour, or None for no colour."""
    parts = numbers(value)
    op = {1: "g", 3: "rg", 4: "k"}.get(len(parts))
    if op is None:
        return None
    return f"{' '.join(num(v) for v in parts)} {op.upper() if stroke else op}"


def number_or(value: object, default: float) -> float:
    """Return a PDF number (pikepdf gives int or Decimal) as a finite float, else *default*."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return default
    number = float(value)
    return number if math.isfinite(number) else default


def border_of(annot: pikepdf.Dictionary) -> tuple[float, str]:
    """Return the border width and the dash operator from /BS (or the older /Border)."""
    bs = annot.get("/BS")
    width, dash = 1.0, ""
    if isinstance(bs, pikepdf.Dictionary):
        width = number_or(bs.get("/W"), 1.0)
        if bs.get("/S") == Name.D:
            pattern = numbers(bs.get("/D")) or [3.0]
            dash = f"[{' '.join(num(v) for v in pattern)}] 0 d"
    else:
        border = numbers(annot.get("/Border"))
        if len(border) >= 3:
            width = border[2]
    return max(0.0, width), dash


def rect_of(annot: pikepdf.Dictionary) -> tuple[float, float, float, float] | None:
    """Return the annotation's /Rect as (left, bottom, right, top), or None if malformed."""
    r = numbers(annot.get("/Rect"))
    if len(r) != 4:
        return None
    return min(r[0], r[2]), min(r[1], r[3]), max(r[0], r[2]), max(r[1], r[3])


def form_xobject(pdf: pikepdf.Pdf, ops: list[str], bbox: tuple[float, ...],
                 resources: pikepdf.Dictionary | None = None) -> pikepdf.Stream:
    """Return a form XObject drawing *ops* in *bbox*: an appearance stream."""
    form = pdf.make_stream("\n".join(ops).encode(), Type=Name.XObject, Subtype=Name.Form,
                           BBox=list(bbox))
    form.Resources = resources if resources is not None else pikepdf.Dictionary()
    return form


def path(points: list[tuple[float, float]], close: bool = False) -> str:
    """Return the operators of a polyline through *points* (closed with *close*), unpainted."""
    first, *rest = points
    ops = [f"{num(first[0])} {num(first[1])} m"] + [f"{num(x)} {num(y)} l" for x, y in rest]
    return " ".join(ops) + (" h" if close else "")


def ellipse(x0: float, y0: float, x1: float, y1: float) -> str:
    """Return the operators of the ellipse inscribed in a box, as four Bezier curves."""
    cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
    kx, ky = rx * _KAPPA, ry * _KAPPA
    p = num
    return (f"{p(cx + rx)} {p(cy)} m "
            f"{p(cx + rx)} {p(cy + ky)} {p(cx + kx)} {p(cy + ry)} {p(cx)} {p(cy + ry)} c "
            f"{p(cx - kx)} {p(cy + ry)} {p(cx - rx)} {p(cy + ky)} {p(cx - rx)} {p(cy)} c "
            f"{p(cx - rx)} {p(cy - ky)} {p(cx - kx)} {p(cy - ry)} {p(cx)} {p(cy - ry)} c "
            f"{p(cx + kx)} {p(cy - ry)} {p(cx + rx)} {p(cy - ky)} {p(cx + rx)} {p(cy)} c h")
