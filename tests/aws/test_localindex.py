"""The local stack's partition index answers Queries exactly as a full filter would."""

from __future__ import annotations

import random
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError


@pytest.fixture
def table(aws_endpoint):
    name = f"idx-{uuid.uuid4().hex[:8]}"
    client = boto3.client("dynamodb")
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "shard", "AttributeType": "S"},
                              {"AttributeName": "at", "AttributeType": "N"}],
        GlobalSecondaryIndexes=[{"IndexName": "by-shard", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "shard", "KeyType": "HASH"},
                                               {"AttributeName": "at", "KeyType": "RANGE"}]}])
    return client, name


def query(client, name, shard) -> set[str]:
    items = client.query(TableName=name, IndexName="by-shard",
                         KeyConditionExpression="#s = :s", ExpressionAttributeNames={"#s": "shard"},
                         ExpressionAttributeValues={":s": {"S": shard}})["Items"]
    return {i["pk"]["S"] for i in items}


class TestPartitionIndex:
    def test_random_writes_keep_queries_exact(self, table):
        """Puts, moves between partitions, removals, deletes and failed transactions agree."""
        client, name = table
        rng = random.Random(11)
        model: dict[str, str | None] = {}
        for step in range(300):
            pk = f"k{rng.randrange(40)}"
            op = rng.choice(["put", "move", "remove", "delete", "txn-fail"])
            shard = f"s{rng.randrange(4)}"
            if op == "put":
                client.put_item(TableName=name, Item={"pk": {"S": pk}, "shard": {"S": shard},
                                                      "at": {"N": str(step)}})
                model[pk] = shard
            elif op == "move" and pk in model:
                client.update_item(TableName=name, Key={"pk": {"S": pk}},
                                   UpdateExpression="SET #s = :s, #a = :a",
                                   ExpressionAttributeNames={"#a": "at", "#s": "shard"},
                                   ExpressionAttributeValues={":s": {"S": shard},
                                                              ":a": {"N": str(step)}})
                model[pk] = shard
            elif op == "remove" and pk in model:
                client.update_item(TableName=name, Key={"pk": {"S": pk}},
                                   UpdateExpression="REMOVE #s",
                                   ExpressionAttributeNames={"#s": "shard"})
                model[pk] = None
            elif op == "delete":
                client.delete_item(TableName=name, Key={"pk": {"S": pk}})
                model.pop(pk, None)
            elif op == "txn-fail":
                with pytest.raises(ClientError):
                    client.transact_write_items(TransactItems=[
                        {"Put": {"TableName": name, "Item": {"pk": {"S": pk}, "shard": {"S": "s9"},
                                                             "at": {"N": "1"}}}},
                        {"ConditionCheck": {"TableName": name, "Key": {"pk": {"S": "nope"}},
                                            "ConditionExpression": "attribute_exists(pk)"}}])
            for s in ("s0", "s1", "s2", "s3", "s9"):
                assert query(client, name, s) == {k for k, v in model.items() if v == s}, step
