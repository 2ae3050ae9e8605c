"""Build DynamoDB update expressions with placeholders for every name.

Attribute names such as ``status``, ``host`` and ``token`` are DynamoDB
reserved words; going through placeholders everywhere avoids the trap.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs


@attrs.define
class Update:
    """Accumulate SET / REMOVE / ADD clauses, names and values."""

    names: dict[str, str] = attrs.field(factory=dict)
    values: dict[str, Any] = attrs.field(factory=dict)
    _set: list[str] = attrs.field(factory=list)
    _remove: list[str] = attrs.field(factory=list)
    _add: list[str] = attrs.field(factory=list)

    def name(self, attr: str) -> str:
        """Return the placeholder of *attr* (``#status``, or ``#n3`` for names like ``t|a|w1``)."""
        for key, known in self.names.items():
            if known == attr:
                return key
        safe = attr.isascii() and attr.replace("_", "a").isalnum()
        key = f"#{attr}" if safe else f"#n{len(self.names)}"
        self.names[key] = attr
        return key

    def value(self, value: Any, hint: str = "v") -> str:
        key = f":{hint}{len(self.values)}"
        self.values[key] = value
        return key

    def set(self, **fields: Any) -> "Update":
        for attr, value in fields.items():
            if value is None:
                continue
            self._set.append(f"{self.name(attr)} = {self.value(value)}")
        return self

    def set_if_absent(self, **fields: Any) -> "Update":
        for attr, value in fields.items():
            if value is None:
                continue
            n = self.name(attr)
            self._set.append(f"{n} = if_not_exists({n}, {self.value(value)})")
        return self

    def remove(self, *attrs_: str) -> "Update":
        self._remove.extend(self.name(a) for a in attrs_)
        return self

    def add(self, fields: Mapping[str, Any] | None = None, **more: Any) -> "Update":
        """ADD numbers; *fields* takes attribute names that are not Python identifiers."""
        for attr, value in {**(fields or {}), **more}.items():
            self._add.append(f"{self.name(attr)} {self.value(value)}")
        return self

    @property
    def expression(self) -> str:
        parts = []
        if self._set:
            parts.append("SET " + ", ".join(self._set))
        if self._remove:
            parts.append("REMOVE " + ", ".join(self._remove))
        if self._add:
            parts.append("ADD " + ", ".join(self._add))
        return " ".join(parts)
