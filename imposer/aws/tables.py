"""DynamoDB table layouts as data, and making a table match one (`imposer init`).

Each store in ``imposer.state`` declares its table as a ``TableSpec``: keys,
global secondary indexes and the TTL attribute. ``ensure`` creates a missing
table (with point-in-time recovery, as the template makes it), and on an
existing one (made by an older imposer) adds the indexes it lacks and turns
TTL on, so an upgrade is `imposer init` again. The CloudFormation template is
checked against the same specs.
"""

from __future__ import annotations

import time
from typing import Any

import attrs
import botocore.exceptions

from imposer.aws import session
from imposer.aws.dynamodb import Dynamo


@attrs.frozen(kw_only=True)
class Index:
    """A global secondary index."""

    name: str
    hash_key: str
    range_key: str | None = None
    #: "N" when the range key is a number, else "S".
    range_type: str = "S"
    #: "ALL", "KEYS_ONLY", or the attribute names to include.
    projection: str | tuple[str, ...] = "ALL"

    def to_api(self) -> dict[str, Any]:
        keys = [{"AttributeName": self.hash_key, "KeyType": "HASH"}]
        if self.range_key:
            keys.append({"AttributeName": self.range_key, "KeyType": "RANGE"})
        if isinstance(self.projection, tuple):
            projection = {"ProjectionType": "INCLUDE",
                          "NonKeyAttributes": list(self.projection)}
        else:
            projection = {"ProjectionType": self.projection}
        return {"IndexName": self.name, "KeySchema": keys, "Projection": projection}


@attrs.frozen(kw_only=True)
class TableSpec:
    """One table: its key, indexes and TTL attribute, all string keys unless said."""

    name: str
    hash_key: str
    range_key: str | None = None
    range_type: str = "S"
    indexes: tuple[Index, ...] = ()
    #: Attribute holding an epoch-seconds expiry; None for no TTL.
    ttl_attribute: str | None = None

    def attribute_types(self) -> dict[str, str]:
        types = {self.hash_key: "S"}
        if self.range_key:
            types[self.range_key] = self.range_type
        for index in self.indexes:
            types[index.hash_key] = "S"
            if index.range_key:
                types[index.range_key] = index.range_type
        return types

    def key_schema(self) -> list[dict[str, str]]:
        keys = [{"AttributeName": self.hash_key, "KeyType": "HASH"}]
        if self.range_key:
            keys.append({"AttributeName": self.range_key, "KeyType": "RANGE"})
        return keys


def _definitions(spec: TableSpec, names: set[str]) -> list[dict[str, str]]:
    types = spec.attribute_types()
    return [{"AttributeName": n, "AttributeType": types[n]} for n in sorted(names)]


def ensure(dynamo: Dynamo, spec: TableSpec, wait: float = 120.0) -> list[str]:
    """Make *spec*'s table exist with its indexes and TTL; return what was done, in words."""
    client, done = dynamo.client, []
    with session.translated(f"create {spec.name}"):
        try:  # look first: a stack's operator may read tables, not create them
            client.describe_table(TableName=spec.name)
        except botocore.exceptions.ClientError as exc:
            if session.error_code(exc) != "ResourceNotFoundException":
                raise
            client.create_table(
                TableName=spec.name, KeySchema=spec.key_schema(),
                AttributeDefinitions=_definitions(spec, set(spec.attribute_types())),
                BillingMode="PAY_PER_REQUEST",
                **({"GlobalSecondaryIndexes": [i.to_api() for i in spec.indexes]}
                   if spec.indexes else {}))
            done.append("created")
        _wait_active(client, spec.name, wait)
        if done:
            client.update_continuous_backups(TableName=spec.name,
                                             PointInTimeRecoverySpecification={
                                                 "PointInTimeRecoveryEnabled": True})
        table = client.describe_table(TableName=spec.name)["Table"]
        have = {i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])}
        for index in spec.indexes:
            if index.name in have:
                continue
            names = {index.hash_key} | ({index.range_key} if index.range_key else set())
            client.update_table(
                TableName=spec.name, AttributeDefinitions=_definitions(spec, names),
                GlobalSecondaryIndexUpdates=[{"Create": index.to_api()}])
            _wait_active(client, spec.name, wait)
            done.append(f"added index {index.name}")
        if spec.ttl_attribute:
            ttl = client.describe_time_to_live(TableName=spec.name)["TimeToLiveDescription"]
            if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
                client.update_time_to_live(TableName=spec.name, TimeToLiveSpecification={
                    "Enabled": True, "AttributeName": spec.ttl_attribute})
                done.append(f"TTL on {spec.ttl_attribute}")
    return done


def describe(dynamo: Dynamo, name: str) -> dict[str, Any]:
    """Return the table's description with its TTL setting, as the API gives them."""
    with session.translated(f"describe {name}"):
        table = dynamo.client.describe_table(TableName=name)["Table"]
        table["TimeToLive"] = dynamo.client.describe_time_to_live(
            TableName=name)["TimeToLiveDescription"]
    return table


def point_in_time_recovery(dynamo: Dynamo, name: str) -> bool:
    """Say whether the table can be restored to any second of the last 35 days."""
    with session.translated(f"read the backups of {name}"):
        reply = dynamo.client.describe_continuous_backups(TableName=name)
    return reply["ContinuousBackupsDescription"].get("PointInTimeRecoveryDescription", {}).get(
        "PointInTimeRecoveryStatus") == "ENABLED"


def _wait_active(client: Any, name: str, timeout: float) -> None:
    """Wait until the table and every index of it are ACTIVE (index builds take a while)."""
    deadline = time.monotonic() + timeout
    while True:
        table = client.describe_table(TableName=name)["Table"]
        states = [table.get("TableStatus")] + [
            i.get("IndexStatus", "ACTIVE") for i in table.get("GlobalSecondaryIndexes", [])]
        if all(s == "ACTIVE" for s in states) or time.monotonic() > deadline:
            return
        time.sleep(0.5)
