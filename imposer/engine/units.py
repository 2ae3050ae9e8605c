"""Lengths and named sheet sizes, converted exactly to PDF points.

A PDF point is 1/72 inch (not TeX's 1/72.27), so a millimetre is exactly
72/25.4 pt. Every length in a layout spec goes through :func:`parse_length`.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: The largest length a spec may give, points: 200 in, the page size limit of the PDF
#: standard (ISO 32000-1 annex C). Anything larger is a mistake or an attack.
MAX_LENGTH = 14_400.0

#: Points per unit; the only units a spec may use.
UNITS = {"pt": 1.0, "mm": 72 / 25.4, "cm": 720 / 25.4, "in": 72.0}

#: Named sheet sizes, portrait, as (width, height) in points.
SIZES = {
    "A5": (148 * 72 / 25.4, 210 * 72 / 25.4),
    "A4": (210 * 72 / 25.4, 297 * 72 / 25.4),
    "A3": (297 * 72 / 25.4, 420 * 72 / 25.4),
    "A2": (420 * 72 / 25.4, 594 * 72 / 25.4),
    "SRA4": (225 * 72 / 25.4, 320 * 72 / 25.4),
    "SRA3": (320 * 72 / 25.4, 450 * 72 / 25.4),
    "SRA2": (450 * 72 / 25.4, 640 * 72 / 25.4),
    "Letter": (612.0, 792.0),
    "Legal": (612.0, 1008.0),
    "Tabloid": (792.0, 1224.0),
}

_LENGTH_RE = re.compile(r"^\s*(-?(?:\d+(?:\.\d*)?|\.\d+))\s*([a-z]+)\s*$")


class LengthError(ValueError):
    """A value is not a length; the message says what was wrong with it."""


def parse_length(value: Any, unit: str) -> float:
    """Return *value* in points: a number in *unit*, or a string such as ``"3mm"``."""
    if isinstance(value, bool):
        raise LengthError(f"want a length, got {brief(value)}")
    if isinstance(value, (int, float)):
        factor = UNITS[unit]
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            raise LengthError("want a length of at most 200 in (14400 pt), got "
                              + brief(value)) from None
    elif isinstance(value, str):
        match = _LENGTH_RE.match(value.lower())
        if not match or match.group(2) not in UNITS:
            raise LengthError(
                f"want a number or a string like '3mm', '8.5in', '12pt', got {brief(value)}")
        number, factor = float(match.group(1)), UNITS[match.group(2)]
    else:
        raise LengthError(f"want a length, got {type(value).__name__} {brief(value)}")
    if not math.isfinite(number):
        raise LengthError(f"want a finite length, got {brief(value)}")
    points = number * factor
    if abs(points) > MAX_LENGTH:
        raise LengthError(f"want a length of at most 200 in (14400 pt), got {brief(value)}")
    return points


def brief(value: Any, limit: int = 60) -> str:
    """Return repr(value) cut to *limit* characters, so a hostile value cannot flood a message.

    Containers are never repr'd whole: a list nested 10,000 deep would recurse.
    """
    if isinstance(value, (dict, list, tuple)):
        return f"{'an object' if isinstance(value, dict) else 'a list'} of {len(value)} items"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10 ** 30:
        return f"a number of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 5] + "...'" 


def size_named(name: str) -> tuple[str, tuple[float, float]] | None:
    """Return the canonical name and portrait size of a named sheet, or None."""
    for known, size in SIZES.items():
        if known.lower() == name.strip().lower():
            return known, size
    return None


def mm(points: float) -> float:
    """Convert points to millimetres."""
    return points * 25.4 / 72


def fmt(number: float, places: int = 3) -> str:
    """Format a number briefly: ``3``, ``6.35``, never ``-0``."""
    text = f"{number:.{places}f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text
