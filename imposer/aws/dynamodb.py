"""The DynamoDB adapter: the only module that talks to DynamoDB.

Items go in and out as plain Python (floats and ints, not Decimal);
a cancelled transaction becomes :class:`TransactionCancelled` carrying one
reason per item so that callers can tell *at cap* from *duplicate*.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any, Iterator

import attrs
import botocore.exceptions
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from imposer.aws import session
from imposer.errors import BackendError, MissingResource
from imposer.logs import extra

logger = logging.getLogger(__name__)
_ser = TypeSerializer()
_de = TypeDeserializer()


def _plain_to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _plain_to_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_to_dynamo(v) for v in value]
    return value


def _dynamo_to_plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _dynamo_to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, set)):
        return [_dynamo_to_plain(v) for v in value]
    return value


def serialize(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(_plain_to_dynamo(v)) for k, v in item.items()}


def deserialize(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _dynamo_to_plain(_de.deserialize(v)) for k, v in item.items()}


@attrs.frozen(kw_only=True)
class Reason:
    """Why one item of a cancelled transaction failed."""

    code: str
    #: The item as it was, when the condition check failed and we asked for it.
    item: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.code not in ("None", "")


class TransactionCancelled(BackendError):
    """A transaction was cancelled; ``reasons`` has one entry per item, in order."""

    def __init__(self, reasons: list[Reason]) -> None:
        super().__init__("transaction cancelled: " + ", ".join(r.code for r in reasons))
        self.reasons = reasons


def _expressions(condition: str | None = None, values: dict[str, Any] | None = None,
                 names: dict[str, str] | None = None, **more: str | None) -> dict[str, Any]:
    """Return the expression arguments that are set, in boto3's spelling."""
    out: dict[str, Any] = {key: text for key, text in more.items() if text}
    if condition:
        out["ConditionExpression"] = condition
    if values:
        out["ExpressionAttributeValues"] = serialize(values)
    if names:
        out["ExpressionAttributeNames"] = names
    return out


def op(kind: str, table: str, key_or_item: dict[str, Any], condition: str | None = None,
       update: str | None = None, values: dict[str, Any] | None = None,
       names: dict[str, str] | None = None, return_old: bool = False) -> dict[str, Any]:
    """Build one TransactWriteItems entry from plain values."""
    body: dict[str, Any] = {"TableName": table,
                            "Item" if kind == "Put" else "Key": serialize(key_or_item),
                            **_expressions(condition, values, names, UpdateExpression=update)}
    if return_old:
        body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {kind: body}


class Dynamo:
    """Thin, typed access to DynamoDB for the lease, job and tenant stores."""

    def __init__(self, region: str) -> None:
        self.client = session.client("dynamodb", region)

    def get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        with session.translated(f"read {table}"):
            resp = self.client.get_item(TableName=table, Key=serialize(key), ConsistentRead=True)
        item = resp.get("Item")
        return deserialize(item) if item else None

    def put(self, table: str, item: dict[str, Any], condition: str | None = None,
            values: dict[str, Any] | None = None, names: dict[str, str] | None = None) -> bool:
        """Put an item; return False when *condition* did not hold."""
        kwargs = {"TableName": table, "Item": serialize(item),
                  **_expressions(condition, values, names)}
        return self._conditional(f"write {table}", self.client.put_item, kwargs)

    def update(self, table: str, key: dict[str, Any], update: str,
               values: dict[str, Any] | None = None, names: dict[str, str] | None = None,
               condition: str | None = None) -> bool:
        """Update an item; return False when *condition* did not hold."""
        kwargs = {"TableName": table, "Key": serialize(key),
                  **_expressions(condition, values, names, UpdateExpression=update)}
        return self._conditional(f"update {table}", self.client.update_item, kwargs)

    def _conditional(self, what: str, call, kwargs: dict[str, Any]) -> bool:
        with session.translated(what):
            try:
                call(**kwargs)
            except botocore.exceptions.ClientError as exc:
                if session.error_code(exc) == "ConditionalCheckFailedException":
                    return False
                raise
        return True

    def transact(self, items: list[dict[str, Any]], what: str, token: str | None = None) -> None:
        """Run TransactWriteItems; raise TransactionCancelled with per-item reasons.

        *token* is the ClientRequestToken: the same token (with the same items)
        within ten minutes is answered as the success it was, not run again.
        Without one botocore makes one per call, good only for its own retries.
        """
        kwargs: dict[str, Any] = {"TransactItems": items}
        if token:
            kwargs["ClientRequestToken"] = token
        with session.translated(what):
            try:
                self.client.transact_write_items(**kwargs)
            except botocore.exceptions.ClientError as exc:
                if session.error_code(exc) != "TransactionCanceledException":
                    raise
                raw = exc.response.get("CancellationReasons") or []
                reasons = [
                    Reason(code=r.get("Code", "None"),
                           item=deserialize(r["Item"]) if r.get("Item") else None)
                    for r in raw
                ]
                if logger.isEnabledFor(logging.DEBUG):
                    codes = [r.code for r in reasons]
                    logger.debug("transaction cancelled: %s (%s)", what, ", ".join(codes),
                                 extra=extra("transaction_cancelled", what=what, reasons=codes))
                if any(r.code == "TransactionConflict" for r in reasons):
                    exc.response["Error"]["Code"] = "TransactionConflictException"
                    raise
                raise TransactionCancelled(reasons) from None
        logger.debug("transaction: %s", what, extra=extra("transaction", what=what))

    def query(self, table: str, key: str, values: dict[str, Any],
              names: dict[str, str] | None = None, *, index: str | None = None,
              filter: str | None = None, limit: int | None = None, newest_first: bool = False,
              start: dict[str, Any] | None = None, consistent: bool = False,
              ProjectionExpression: str | None = None,  # noqa: N803 (boto3's spelling)
              ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """Return one page of items matching the key condition, and the key to go on from."""
        kwargs: dict[str, Any] = {
            "TableName": table, "ScanIndexForward": not newest_first,
            **_expressions(None, values, names, KeyConditionExpression=key,
                           FilterExpression=filter, ProjectionExpression=ProjectionExpression)}
        if index:
            kwargs["IndexName"] = index
        elif consistent:
            kwargs["ConsistentRead"] = True
        if limit:
            kwargs["Limit"] = limit
        if start:
            kwargs["ExclusiveStartKey"] = serialize(start)
        with session.translated(f"query {table}{'/' + index if index else ''}"):
            resp = self.client.query(**kwargs)
        last = resp.get("LastEvaluatedKey")
        return [deserialize(i) for i in resp.get("Items", [])], deserialize(last) if last else None

    def query_all(self, table: str, key: str, values: dict[str, Any],
                  names: dict[str, str] | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Yield every item matching the key condition, page after page."""
        start = None
        while True:
            items, start = self.query(table, key, values, names, start=start, **kwargs)
            yield from items
            if start is None:
                return

    def batch_get(self, table: str, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Read up to any number of items by key (100 per call), strongly consistent."""
        out: list[dict[str, Any]] = []
        pending = [serialize(k) for k in keys]
        while pending:
            chunk, pending = pending[:100], pending[100:]
            request = {table: {"Keys": chunk, "ConsistentRead": True}}
            while request:
                with session.translated(f"read {table}"):
                    resp = self.client.batch_get_item(RequestItems=request)
                out += [deserialize(i) for i in resp.get("Responses", {}).get(table, [])]
                request = resp.get("UnprocessedKeys") or None
        return out

    def delete(self, table: str, key: dict[str, Any]) -> None:
        with session.translated(f"delete from {table}"):
            self.client.delete_item(TableName=table, Key=serialize(key))

    def scan(self, table: str, filter: str | None = None,
             values: dict[str, Any] | None = None,
             names: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
        """Yield every item of *table* (strongly consistent) matching *filter*.

        Only for small tables (leases, tenants) and explicit exports: a Scan of
        a table that grows with history has no place on a routine path.
        """
        kwargs = {"TableName": table, "ConsistentRead": True,
                  **_expressions(None, values, names, FilterExpression=filter)}
        while True:
            with session.translated(f"scan {table}"):
                resp = self.client.scan(**kwargs)
            for item in resp.get("Items", []):
                yield deserialize(item)
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def table_exists(self, table: str) -> bool:
        try:
            with session.translated(f"describe {table}"):
                self.client.describe_table(TableName=table)
        except MissingResource:
            return False
        return True
