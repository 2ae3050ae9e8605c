"""Read layout JSON with limits, one object at a time, naming the field at fault.

A layout may come from a tenant, so it is read as hostile: text is bounded in
size and nesting depth before ``json.loads`` sees it (deep nesting would raise
RecursionError), and every complaint is a LayoutError that quotes at most a
short excerpt of the offending value.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from imposer.engine.units import LengthError, brief, fmt, mm, parse_length
from imposer.errors import LayoutError

#: Deepest nesting of objects and lists a layout may use (a real spec uses 3).
MAX_DEPTH = 32
#: Largest layout text, bytes (a real spec is under 2 KB).
MAX_TEXT = 1 << 20
#: Marks a required field in Fields.take.
MISSING = object()
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def show(points: float, places: int = 2) -> str:
    """Format a length for an error message, in mm and pt."""
    return f"{fmt(mm(points), places)} mm ({fmt(points, places)} pt)"


def show_over(need: float, have: float) -> tuple[str, str]:
    """Format *need* and *have* with enough decimals that they never read the same."""
    for places in (2, 3, 4, 6):
        pair = show(need, places), show(have, places)
        if pair[0] != pair[1]:
            return pair
    return pair


def decode_json(text: str, where: str) -> Any:
    """Parse layout JSON text, refusing what is too large or nested too deeply."""
    if len(text) > MAX_TEXT:
        raise LayoutError(f"layout {where} is {len(text)} characters; the limit is {MAX_TEXT}")
    depth = deepest = 0
    for token in _STRUCTURE.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise LayoutError(f"layout {where} nests {deepest} levels deep; the limit is {MAX_DEPTH}")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:  # the scan above should have caught it; never let it escape
        raise LayoutError(f"layout {where} nests too deeply") from None
    except ValueError as exc:
        raise LayoutError(f"layout {where} is not valid JSON: {exc}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def check_depth(data: Any) -> None:
    """Refuse inline layout data nested deeper than MAX_DEPTH, without recursing."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise LayoutError(f"layout nests more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)


def kind_of(value: Any) -> str:
    """Name a JSON value's type for a message."""
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), brief(value))


class Fields:
    """One JSON object being read: remembers the keys used so leftovers can be named."""

    def __init__(self, data: Any, path: str, unit: str = "mm") -> None:
        if not isinstance(data, dict):
            where = f"layout field '{path}'" if path else "layout"
            raise LayoutError(f"{where}: want a JSON object, got {kind_of(data)}")
        for key in data:
            if not isinstance(key, str):
                raise LayoutError(f"layout field '{path}': key {brief(key)} is not a string")
        self.data, self.path, self.unit, self.used = data, path, unit, set()

    def error(self, key: str, message: str) -> LayoutError:
        where = f"{self.path}.{key}" if self.path else key
        cut = where if len(where) <= 80 else where[:77] + "..."
        return LayoutError(f"layout field '{cut}': {message}")

    def take(self, key: str, default: Any = MISSING) -> Any:
        self.used.add(key)
        if key not in self.data or self.data[key] is None:
            if default is MISSING:
                raise self.error(key, "missing (required)")
            return default
        return self.data[key]

    def length(self, key: str, default: Any = 0.0, positive: bool = False) -> float:
        """Read a length in the spec's unit; *default* is in points."""
        if default is not MISSING and self.data.get(key) is None:
            self.used.add(key)
            return default
        raw = self.take(key)
        try:
            value = parse_length(raw, self.unit)
        except LengthError as exc:
            raise self.error(key, str(exc)) from None
        if value < 0 or (positive and value == 0):
            raise self.error(key, f"must be {'> 0' if positive else '>= 0'}, got {brief(raw)}")
        return value

    def choice(self, key: str, options: tuple[str, ...] | dict, default: Any = MISSING) -> Any:
        raw = self.take(key, default)
        for option in options:
            if isinstance(raw, str) and raw.lower() == option.lower():
                return option
        raise self.error(key, f"want one of {', '.join(options)}; got {brief(raw)}")

    def flag(self, key: str, default: bool) -> bool:
        raw = self.take(key, default)
        if not isinstance(raw, bool):
            raise self.error(key, f"want true or false, got {brief(raw)}")
        return raw

    def integer(self, key: str, low: int, high: int, default: Any = MISSING) -> int:
        raw = self.take(key, default)
        if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
            raise self.error(key, f"want a whole number from {low} to {high}, got {brief(raw)}")
        return raw

    def finish(self) -> None:
        for key in self.data:
            if key not in self.used:
                near = difflib.get_close_matches(key, list(self.used), n=1) \
                    if len(key) <= 64 else []
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                raise self.error(key, f"unknown field{hint}")
