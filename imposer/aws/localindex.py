"""Give the local stack DynamoDB's cost shape: a Query reads its partition, not the table.

moto answers every Query (on a table or a global secondary index) by
sorting and filtering *all* items of the table, so on `imposer local` an
index over live work would still cost O(history) and no benchmark could tell
a Query from a Scan. Installed by ``LocalStack``, this keeps, for each table,
the items of each GSI partition (hash value), updated after every write
moto's backend makes (PutItem, UpdateItem and DeleteItem are also what batch
writes and transactions use), and lets a Query see only its partition.

Only the candidate set changes: moto still applies key conditions, filters,
sorting, limits and projections to it, so results are moto's own. Every
DynamoDB request of the local stack runs under one lock, so the index needs
none; a transaction that moto rolls back restores its deep copy of the
table, index included.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

_local = threading.local()
_STATE = "_imposer_gsi"


def _state(table) -> dict:
    """Return the table's partition index, (re)built when its set of indexes changed."""
    names = tuple(i.name for i in (table.global_indexes or []))
    state = table.__dict__.get(_STATE)
    if state is None or state["names"] != names:
        state = {"names": names, "buckets": {n: {} for n in names}, "where": {}}
        table.__dict__[_STATE] = state
        for item in _ORIGINAL["all_items"](table):
            _place(table, state, item)
    return state


def _hash_attr(index) -> str | None:
    return next((k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"), None)


def _key(item) -> tuple:
    return item.hash_key, item.range_key


def _place(table, state: dict, item) -> None:
    where = state["where"].setdefault(_key(item), {})
    for index in table.global_indexes or []:
        value = item.attrs.get(_hash_attr(index))
        if value is not None:
            state["buckets"][index.name].setdefault(value, {})[_key(item)] = item
            where[index.name] = value


def reindex(table, hash_value, range_value) -> None:
    """Put the item under this key (if any) back in the partitions it belongs to now."""
    state = _state(table)
    key = (hash_value, range_value)
    for name, value in state["where"].pop(key, {}).items():
        state["buckets"][name].get(value, {}).pop(key, None)
    item = table.get_item(hash_value, range_value) if not table.range_key_attr or range_value \
        else None
    if item is not None:
        _place(table, state, item)


def _keys(table, attrs: dict[str, Any]):
    from moto.dynamodb.models.dynamo_type import DynamoType

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
            if table is not None and attrs:
                reindex(table, *_keys(table, attrs))

    return write


def _query(table, *args, **kwargs):
    bound = _SIGNATURE["query"].bind(table, *args, **kwargs).arguments
    hash_key, index_name = bound.get("hash_key"), bound.get("index_name")
    hash_key_conditions = bound.get("hash_key_conditions")
    candidates = None
    if index_name:
        index = next((i for i in table.global_indexes or [] if i.name == index_name), None)
        wanted = dict(hash_key_conditions or [])
        if index is not None and _hash_attr(index) in wanted:
            bucket = _state(table)["buckets"][index_name]
            candidates = list(bucket.get(wanted[_hash_attr(index)], {}).values())
    elif hash_key is not None:
        found = table.items.get(hash_key)
        if found is None:
            candidates = []
        else:
            candidates = list(found.values()) if table.range_key_attr else [found]
    _local.candidates = candidates
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
    """Patch moto's DynamoDB (once per process) so Queries read only their partition."""
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
