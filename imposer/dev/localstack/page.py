"""Cut a Query to the items moto's loop would look at: O(log n + limit).

moto's ``Table.query`` sorts its candidates, skips those up to
ExclusiveStartKey, appends those that meet the sort key condition, and stops
at the first item (meeting it or not) once it holds Limit items or the next
would pass 1 MB, returning LastEvaluatedKey then; filters and projections
come after. Given a partition's keys in moto's order, ``page`` finds, by
bisection, the part of that walk which decides the answer, so moto given only
those items answers as it would given them all.
"""

from __future__ import annotations

import bisect
from typing import Callable

SCALARS = ("S", "N", "B")
#: moto refuses an item whose attributes exceed this many bytes (its LimitedSizeDict).
_ITEM_MAX = 405_000
#: moto ends a page before its items pass this many bytes (RESULT_SIZE_LIMIT).
_PAGE_MAX = 1_000_000


class Unordered(Exception):
    """A key value that cannot be ordered as moto orders it (not S, N or B, or a new type)."""


def comparable(typed) -> tuple:
    """A key attribute's value as a tuple that compares as moto compares its DynamoType."""
    if typed.type not in SCALARS:
        raise Unordered(typed.type)
    return typed.cast_value, typed.type


def _bounds(keys: list[tuple], op: str, values: list) -> tuple[int, int] | None:
    """The slice of *keys* whose sort key value (their second) meets ``op values``."""
    def left(v):
        return bisect.bisect_left(keys, v, key=_sort_value)

    def right(v):
        return bisect.bisect_right(keys, v, key=_sort_value)

    if op == "BETWEEN" and len(values) == 2:
        return left(values[0]), right(values[1])
    if len(values) != 1:
        return None
    v = values[0]
    if op == "=":
        return left(v), right(v)
    if op == "<":
        return 0, left(v)
    if op == "<=":
        return 0, right(v)
    if op == ">":
        return right(v), len(keys)
    if op == ">=":
        return left(v), len(keys)
    if op == "BEGINS_WITH" and isinstance(v, str):
        # From the first value >= the prefix, those that start with it come first.
        start = left(v)
        return start, bisect.bisect_left(keys, True, lo=start,
                                         key=lambda k: not k[1][0].startswith(v))
    return None


def _sort_value(key: tuple):
    return key[1][0]


def page(keys: list[tuple], layout, q: dict, size: Callable[[tuple], int]) -> list[tuple] | None:
    """The sort keys of the items moto's loop would look at, or None to hand it them all.

    moto walks the sorted partition: it skips items up to ExclusiveStartKey,
    appends those that meet the sort key condition, and stops at the first
    item (meeting it or not) once it holds Limit items or the next would pass
    1 MB, returning LastEvaluatedKey then. Items before the condition's range
    change nothing; after it, only the next one when Limit is reached.
    *keys* is a partition in moto's order, *layout* says its sort attributes
    (``sort``), the index's key attributes (``needs``) and their types
    (``types``), and *size* gives the size of the item under a key.
    """
    limit, forward = q.get("limit"), q.get("scan_index_forward") is not False
    if q.get("filter_kwargs") or (limit is not None and (
            type(limit) is not int or limit < 1)):
        return None
    if not keys:
        return []
    lo, hi = 0, len(keys)
    conditions, op = q.get("range_key_conditions") or [], q.get("range_comparison")
    if conditions or op:
        if len(conditions) != 1 or len(layout.needs) != 2 or conditions[0][0] != layout.needs[1]:
            return None
        values = q.get("range_objs") or []
        if any(v.type != layout.types[1] for v in values):
            return None
        window = _bounds(keys, op, [v.cast_value for v in values])
        if window is None:
            return None
        lo, hi = window
    start_key = q.get("exclusive_start_key")
    if start_key is not None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        try:
            after = tuple(comparable(DynamoType(start_key[a])) for a in layout.sort)
        except Exception:  # a start key moto would choke on: let it
            return None
        if tuple(t for _, t in after) != layout.types:
            return None
        if forward:
            lo = max(lo, bisect.bisect_right(keys, after))
        else:
            hi = min(hi, bisect.bisect_left(keys, after))
    if lo >= hi:
        return []
    if forward:
        end = hi if limit is None else min(hi, lo + limit)
        taken, rest = keys[lo:end], keys[end:end + 1]
    else:
        begin = lo if limit is None else max(lo, hi - limit)
        taken, rest = keys[begin:hi], keys[max(begin - 1, 0):begin]
    if len(taken) == limit:
        return taken + rest
    # Short of Limit, moto walks on through the items that fail the condition, and any
    # of them could stop it at 1 MB: only a small enough page is sure it will not.
    if rest and sum(size(k) for k in taken) + _ITEM_MAX > _PAGE_MAX:
        return None
    return taken
