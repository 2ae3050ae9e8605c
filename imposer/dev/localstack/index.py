"""Give the local stack DynamoDB's cost shape: a Query reads its page, not the table.

moto answers every Query (on a table or a global secondary index) by
sorting and filtering *all* items of the table, then applying Limit: on
`imposer local` an index over live work would still cost O(history), and a
page of a big partition O(partition), so no benchmark could tell a Query from
a Scan. Installed by ``LocalStack``, this keeps the keys of every partition
(of the table when it has a sort key, and of each global secondary index) in
moto's sort order, updated after every write moto's backend makes (PutItem,
UpdateItem and DeleteItem are also what batch writes and transactions use).
A Query then hands moto only the items its loop would look at (``localpage``):
those that meet the sort key condition, in the requested direction, after
ExclusiveStartKey, as many as Limit takes, and the one after them (whose
presence makes moto return LastEvaluatedKey). That costs O(log n + limit),
as in DynamoDB.

moto still applies key conditions, Limit, filters, sorting and projections
to those items, so results are moto's own, Count, ScannedCount and
LastEvaluatedKey included. A shape this does not handle (a legacy
QueryFilter, multi-attribute keys, key values of mixed or non-scalar types,
a page near moto's 1 MB cap) hands moto the whole partition, and a local
secondary index the whole table, as moto alone would.

Every DynamoDB request of the local stack runs under one lock, so the index
needs none. A transaction that moto cancels is undone by ``localtxn``
through the same writes, so the index follows; where moto alone restores its
deep copy of a table, the index comes with it (the copy shares the index's
keys, which are immutable tuples of plain values, and copies only their
containers).
"""

from __future__ import annotations

import bisect
import copy
import inspect
import threading
from typing import Any

from imposer.dev.localstack.page import SCALARS, Unordered, comparable, page

_local = threading.local()
_STATE = "_imposer_index"


class _Layout:
    """Where moto looks for one index's items (or the table's: name None), and their order."""

    def __init__(self, name: str | None, part: str, sort: tuple, needs: tuple,
                 ordered: bool) -> None:
        self.name = name  #: the index name; None for the table itself
        self.part = part  #: the attribute whose value names a partition
        self.sort = sort  #: moto's sort order within a partition, the table key last
        self.needs = needs  #: attributes an item must have to be in the index
        self.ordered = ordered  #: single-attribute keys: a Query can be cut to its page
        self.types: tuple | None = None  #: each sort attribute's type, fixed by the first item
        self.broken = False  #: a value we cannot order was written: moto reads the table


def _layouts(table) -> list[_Layout]:
    table_key = (table.hash_key_attr,) + ((table.range_key_attr,) if table.range_key_attr else ())
    layouts = []
    if table.range_key_attr:
        layouts.append(_Layout(None, table.hash_key_attr, table_key, table_key, True))
    for index in table.global_indexes or []:
        hashes = tuple(k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH")
        ranges = tuple(k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE")
        if len(hashes) == 1 and len(ranges) <= 1:
            # As moto's Table.query sorts: the index's keys (without a sort key, the
            # table's sort key, or else its hash key), then the table's keys.
            middle = ranges or (table.range_key_attr or table.hash_key_attr,)
            layouts.append(_Layout(index.name, hashes[0], hashes + middle + table_key,
                                   hashes + ranges, True))
        elif hashes:
            # Multi-attribute keys: keep the partition of the first hash attribute only.
            layouts.append(_Layout(index.name, hashes[0], table_key, hashes[:1], False))
    return layouts


class _Index:
    """The sorted keys of each partition of one table, and where each item sits."""

    def __init__(self, signature: tuple, layouts: list[_Layout]) -> None:
        self.signature = signature
        self.layouts = {layout.name: layout for layout in layouts}
        #: (index name, partition value) -> the partition's sort keys, ascending
        self.parts: dict[tuple, list[tuple]] = {}
        #: table key -> ((index name, partition value), sort key) of each place the item is in
        self.where: dict[tuple, tuple] = {}

    def __deepcopy__(self, memo) -> "_Index":
        """Copy the containers only: every key in them is an immutable tuple of plain values."""
        clone = _Index(self.signature, [copy.copy(layout) for layout in self.layouts.values()])
        clone.parts = {pid: list(keys) for pid, keys in self.parts.items()}
        clone.where = dict(self.where)
        return clone


def _signature(table) -> tuple:
    return table.hash_key_attr, table.range_key_attr, tuple(
        (i.name, tuple(tuple(sorted(k.items())) for k in i.schema))
        for i in table.global_indexes or [])


def _state(table) -> _Index:
    """Return the table's index, (re)built when its keys or its set of indexes changed."""
    signature = _signature(table)
    state = table.__dict__.get(_STATE)
    if state is None or state.signature != signature:
        state = _Index(signature, _layouts(table))
        table.__dict__[_STATE] = state
        for item in _ORIGINAL["all_items"](table):
            _place(table, state, item)
    return state


def _table_key(table, item) -> tuple:
    key = (comparable(item.hash_key),)
    return key + (comparable(item.range_key),) if table.range_key_attr else key


def _place(table, state: _Index, item) -> None:
    places = []
    for layout in state.layouts.values():
        if layout.broken or any(a not in item.attrs for a in layout.needs):
            continue
        try:
            part = comparable(item.attrs[layout.part])
        except Unordered:
            continue  # no Query names a non-scalar partition value: moto would skip the item too
        try:
            key = tuple(comparable(item.attrs[a]) for a in layout.sort)
            types = tuple(t for _, t in key)
            if layout.types is None:
                layout.types = types
            elif types != layout.types:
                raise Unordered(types)
        except Unordered:
            _break(state, layout)
            continue
        pid = (layout.name, part)
        bisect.insort(state.parts.setdefault(pid, []), key)
        places.append((pid, key))
    if places:
        state.where[_table_key(table, item)] = tuple(places)


def _break(state: _Index, layout: _Layout) -> None:
    """Give up ordering this index: its Queries go back to moto's reading the whole table."""
    layout.broken = True
    state.parts = {pid: keys for pid, keys in state.parts.items() if pid[0] != layout.name}


def reindex(table, hash_value, range_value) -> None:
    """Put the item under this key (if any) back in the partitions it belongs to now."""
    state = _state(table)
    key = (comparable(hash_value),) + ((comparable(range_value),) if table.range_key_attr else ())
    for pid, sort_key in state.where.pop(key, ()):
        keys = state.parts.get(pid)
        if keys is None:
            continue
        at = bisect.bisect_left(keys, sort_key)
        if at < len(keys) and keys[at] == sort_key:
            del keys[at]
        if not keys:
            del state.parts[pid]
    item = table.get_item(hash_value, range_value) if not table.range_key_attr or range_value \
        else None
    if item is not None:
        _place(table, state, item)


def _keys(table, attrs: dict[str, Any]):
    from moto.dynamodb.models.dynamo_type import DynamoType

    names = (table.hash_key_attr,) + ((table.range_key_attr,) if table.range_key_attr else ())
    if not all(isinstance(attrs.get(n), dict) and len(attrs[n]) == 1
               and next(iter(attrs[n])) in SCALARS for n in names):
        return None  # a request moto refused: it changed nothing
    hash_value = DynamoType(attrs[table.hash_key_attr])
    range_value = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
    return hash_value, range_value


def _after_write(method: str, key_arg: int):
    original = _ORIGINAL[method]

    def write(backend, table_name, *args, **kwargs):
        try:
            return original(backend, table_name, *args, **kwargs)
        finally:
            table = backend.tables.get(table_name)
            attrs = args[key_arg] if len(args) > key_arg else kwargs.get(
                "item_attrs" if method == "put_item" else "key")
            keys = _keys(table, attrs) if table is not None and attrs else None
            if keys is not None:
                reindex(table, *keys)

    return write


def _item(table, key: tuple):
    """The item a sort key names: its last one or two values are the table's key."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    def typed(value: tuple):
        cast, kind = value
        return DynamoType({kind: str(cast) if kind == "N" else cast})

    if not table.range_key_attr:
        return table.items[typed(key[-1])]
    return table.items[typed(key[-2])][typed(key[-1])]


def _candidates(table, q: dict) -> list | None:
    """The items moto must see to answer Query *q* as it would alone; None for the table."""
    index_name = q.get("index_name")
    if index_name and all(i.name != index_name for i in table.global_indexes or []):
        return None
    hash_key = q.get("hash_key")
    if not index_name and not table.range_key_attr:
        found = table.items.get(hash_key) if hash_key is not None else None
        return [] if found is None else [found]
    state = _state(table)
    layout = state.layouts.get(index_name)
    if layout is None or layout.broken:
        return None
    wanted = dict(q.get("hash_key_conditions") or []).get(layout.part) if index_name \
        else hash_key
    if wanted is None or wanted.type not in SCALARS:
        return None
    keys = state.parts.get((index_name, comparable(wanted)), [])
    cut = page(keys, layout, q, lambda k: _item(table, k).size()) if layout.ordered else None
    return [_item(table, k) for k in (keys if cut is None else cut)]


def _query(table, *args, **kwargs):
    q = _SIGNATURE["query"].bind(table, *args, **kwargs).arguments
    _local.candidates = _candidates(table, q)
    try:
        return _ORIGINAL["query"](table, *args, **kwargs)
    finally:
        _local.candidates = None


def _all_items(table):
    candidates = getattr(_local, "candidates", None)
    if candidates is None:
        return _ORIGINAL["all_items"](table)
    return sorted(candidates, key=lambda x: (x.hash_key, x.range_key) if x.range_key
                  else x.hash_key)


_ORIGINAL: dict[str, Any] = {}
_SIGNATURE: dict[str, inspect.Signature] = {}


def install() -> None:
    """Patch moto's DynamoDB (once per process) so a Query reads only its page."""
    if _ORIGINAL:
        return
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    _ORIGINAL.update(query=Table.query, all_items=Table.all_items,
                     put_item=DynamoDBBackend.put_item, update_item=DynamoDBBackend.update_item,
                     delete_item=DynamoDBBackend.delete_item)
    _SIGNATURE["query"] = inspect.signature(Table.query)
    Table.query = _query
    Table.all_items = _all_items
    DynamoDBBackend.put_item = _after_write("put_item", 0)
    DynamoDBBackend.update_item = _after_write("update_item", 0)
    DynamoDBBackend.delete_item = _after_write("delete_item", 0)
