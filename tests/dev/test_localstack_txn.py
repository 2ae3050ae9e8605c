"""The local stack's transactions: undone item by item, never by copying whole tables."""

from __future__ import annotations

import uuid

import boto3
import pytest
from botocore.exceptions import ClientError


@pytest.fixture
def table(inprocess_stack):
    client = boto3.client("dynamodb", endpoint_url=inprocess_stack.url, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    name = f"txn-{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "g", "AttributeType": "S"}],
        GlobalSecondaryIndexes=[{"IndexName": "by-g", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}]}])
    for n in range(50):
        client.put_item(TableName=name, Item={"pk": {"S": f"k{n}"}, "g": {"S": f"g{n % 3}"},
                                              "n": {"N": str(n)}})
    return client, name


def backend_table(name: str):
    from moto.backends import get_backend

    return get_backend("dynamodb")["123456789012"]["us-east-1"].tables[name]


def everything(client, name: str) -> tuple[list, dict]:
    items = client.scan(TableName=name)["Items"]
    by_g = {g: sorted(i["pk"]["S"] for i in client.query(
        TableName=name, IndexName="by-g", KeyConditionExpression="g = :g",
        ExpressionAttributeValues={":g": {"S": g}})["Items"]) for g in ("g0", "g1", "g2", "new")}
    return sorted(items, key=lambda i: i["pk"]["S"]), by_g


def writes(name: str) -> list[dict]:
    """A Put of a new item, a Put over an old one, an Update and a Delete: all allowed."""
    return [
        {"Put": {"TableName": name, "Item": {"pk": {"S": "fresh"}, "g": {"S": "new"}}}},
        {"Put": {"TableName": name, "Item": {"pk": {"S": "k1"}, "g": {"S": "new"}}}},
        {"Update": {"TableName": name, "Key": {"pk": {"S": "k2"}},
                    "UpdateExpression": "SET g = :g ADD n :one",
                    "ExpressionAttributeValues": {":g": {"S": "new"}, ":one": {"N": "1"}}}},
        {"Delete": {"TableName": name, "Key": {"pk": {"S": "k3"}}}}]


FAILS = {"ConditionCheck": {"TableName": "", "Key": {"pk": {"S": "k4"}},
                            "ConditionExpression": "n > :big",
                            "ExpressionAttributeValues": {":big": {"N": "1000"}}}}


class TestTransactions:
    def test_a_cancelled_transaction_leaves_items_and_indexes_as_before(self, table):
        client, name = table
        before, held = everything(client, name), backend_table(name)
        fails = {"ConditionCheck": dict(FAILS["ConditionCheck"], TableName=name)}
        with pytest.raises(ClientError) as caught:
            client.transact_write_items(TransactItems=writes(name) + [fails])
        reasons = [r["Code"] for r in caught.value.response["CancellationReasons"]]
        assert reasons == ["None"] * 4 + ["ConditionalCheckFailed"]
        assert everything(client, name) == before
        assert backend_table(name) is held  # undone in place: no copy of the table put back

    def test_two_writes_of_one_item_are_refused_and_undone(self, table):
        client, name = table
        before = everything(client, name)
        twice = {"Update": {"TableName": name, "Key": {"pk": {"S": "fresh"}},
                            "UpdateExpression": "SET n = :n",
                            "ExpressionAttributeValues": {":n": {"N": "7"}}}}
        with pytest.raises(ClientError, match="multiple operations on one item"):
            client.transact_write_items(TransactItems=writes(name) + [twice])
        assert everything(client, name) == before

    def test_a_committed_transaction_writes_every_item(self, table):
        client, name = table
        client.transact_write_items(TransactItems=writes(name))
        items, by_g = everything(client, name)
        pks = {i["pk"]["S"]: i for i in items}
        assert "k3" not in pks and pks["k2"]["n"] == {"N": "3"}
        assert by_g["new"] == ["fresh", "k1", "k2"]

    def test_no_table_is_copied_where_moto_alone_copies_one_per_item(self, table, monkeypatch):
        """The check can fail: moto alone swaps its copy of the table in on a cancel."""
        import copy

        import moto.dynamodb.models as models
        from moto.dynamodb.models.table import Table

        from imposer.dev.localstack import txn as localtxn

        client, name = table
        fails = {"ConditionCheck": dict(FAILS["ConditionCheck"], TableName=name)}
        copied: list[str] = []

        class Spy:
            def __getattr__(self, attr):
                return getattr(copy, attr)

            @staticmethod
            def deepcopy(value, memo=None):
                out = (localtxn._Copy.deepcopy if alone is False else copy.deepcopy)(value, memo)
                if isinstance(value, Table) and out is not value:
                    copied.append(value.name)
                return out

        for alone in (False, True):
            copied.clear()
            held = backend_table(name)
            monkeypatch.setattr(models, "copy", Spy())
            if alone:
                monkeypatch.setattr(models.DynamoDBBackend, "transact_write_items",
                                    localtxn._ORIGINAL["transact_write_items"])
            with pytest.raises(ClientError, match="TransactionCanceled"):
                client.transact_write_items(TransactItems=writes(name) + [fails])
            assert (copied, backend_table(name) is held) == \
                (([name] * 5, False) if alone else ([], True))  # one per item, the check too
