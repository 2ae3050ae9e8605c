"""Give the local stack DynamoDB's transaction cost: undo the items, not the tables.

Before it applies a ``TransactWriteItems``, moto deep-copies every table the
transaction names, once per item, so that it can put the copies back if the
transaction is cancelled. A lease acquire (three items) against a jobs table
holding a year of history then copies that history three times: on `imposer
local` a transaction costs O(items x table size), where DynamoDB's costs
O(items), and the worker's hot path slows as history grows.

Installed by ``LocalStack``, this keeps moto's own transaction code (its
conditions, cancellation reasons and one-operation-per-item rule) but hands
it each table itself instead of a copy. Before moto runs, it keeps a copy of
each item the transaction writes (or notes that none exists); when moto
cancels the transaction, it writes those back, or deletes the items that did
not exist, through the backend's own writes, so ``localindex`` follows. Every
DynamoDB request of the local stack runs under one lock, so no request sees
the items in between.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

_local = threading.local()
_ORIGINAL: dict[str, Any] = {}


class _Copy:
    """``copy`` as moto's DynamoDB backend sees it: a table inside a transaction is not copied."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict | None = None) -> Any:
        from moto.dynamodb.models.table import Table

        if isinstance(value, Table) and getattr(_local, "transacting", False):
            return value
        return copy.deepcopy(value, memo)


def _before(backend, transact_items: Any) -> list[tuple[str, dict, dict | None]]:
    """(table, key, the item's attributes or None) for every item the transaction may write.

    An entry this cannot key (a missing table, a malformed key) is one moto
    refuses without writing, so it needs no undo.
    """
    undo = []
    for entry in transact_items if isinstance(transact_items, list) else ():
        if not isinstance(entry, dict) or len(entry) != 1:
            continue
        (kind, op), = entry.items()
        if kind not in ("Put", "Update", "Delete") or not isinstance(op, dict):
            continue
        table = backend.tables.get(op.get("TableName"))
        attrs = op.get("Item") if kind == "Put" else op.get("Key")
        if table is None or not isinstance(attrs, dict):
            continue
        names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        try:
            key = {name: attrs[name] for name in names}
            current = backend.get_item(table.name, key)
        except Exception:  # moto fails this item itself, before any write of it
            continue
        undo.append((table.name, key,
                     copy.deepcopy(current.to_json()["Attributes"]) if current else None))
    return undo


def _undo(backend, undo: list[tuple[str, dict, dict | None]]) -> None:
    for table, key, attrs in reversed(undo):
        if attrs is None:
            backend.delete_item(table, key)
        else:
            backend.put_item(table, attrs)


def _transact_write_items(backend, transact_items, *args, **kwargs):
    undo = _before(backend, transact_items)
    _local.transacting = True
    try:
        return _ORIGINAL["transact_write_items"](backend, transact_items, *args, **kwargs)
    except Exception:
        _local.transacting = False
        _undo(backend, undo)
        raise
    finally:
        _local.transacting = False


def install() -> None:
    """Patch moto's DynamoDB (once per process): a transaction copies its items, not tables."""
    if _ORIGINAL:
        return
    import moto.dynamodb.models as models

    _ORIGINAL["transact_write_items"] = models.DynamoDBBackend.transact_write_items
    models.copy = _Copy()
    models.DynamoDBBackend.transact_write_items = _transact_write_items
