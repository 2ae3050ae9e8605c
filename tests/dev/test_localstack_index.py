"""The local stack's index: a Query reads only its page and answers exactly as moto alone."""

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


# Pages: the index hands moto only what its loop looks at, and moto answers as it would alone.

#: index name (None: the table) -> hash attribute, sort attribute, sort attribute's type
SCHEMAS = {None: ("pk", "sk", "N"), "by-at": ("g", "at", "S"), "by-n": ("g", "n", "N"),
           "by-h": ("h", None, None)}
OPS = ("=", "<", "<=", ">", ">=", "BETWEEN", "begins_with")


@pytest.fixture
def paged(inprocess_stack):
    """A table with a numeric sort key and three indexes: string and number sort keys, none."""
    client = boto3.client("dynamodb", endpoint_url=inprocess_stack.url, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    name = f"pages-{uuid.uuid4().hex[:8]}"
    attr = [{"AttributeName": a, "AttributeType": t}
            for a, t in (("pk", "S"), ("sk", "N"), ("g", "S"), ("at", "S"), ("n", "N"),
                         ("h", "S"))]

    def gsi(index, hash_attr, range_attr=None):
        schema = [{"AttributeName": hash_attr, "KeyType": "HASH"}]
        if range_attr:
            schema.append({"AttributeName": range_attr, "KeyType": "RANGE"})
        return {"IndexName": index, "KeySchema": schema, "Projection": {"ProjectionType": "ALL"}}

    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=attr,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[gsi("by-at", "g", "at"), gsi("by-n", "g", "n"),
                                gsi("by-h", "h")])
    return client, name


def random_item(rng: random.Random, pk: str, sk: int) -> dict:
    """An item whose index keys repeat (ties broken by the table key) and are sometimes absent."""
    item = {"pk": {"S": pk}, "sk": {"N": str(sk)}, "g": {"S": f"g{rng.randrange(3)}"},
            "status": {"S": rng.choice(["done", "failed"])}}
    if rng.random() < 0.9:
        item["at"] = {"S": "".join(rng.choice("abc") for _ in range(rng.randrange(1, 4)))}
    if rng.random() < 0.9:
        item["n"] = {"N": str(rng.randrange(-5, 30) / rng.choice([1, 2]))}
    if rng.random() < 0.5:
        item["h"] = {"S": rng.choice(["h0", "h1"])}
    return item


def operand(rng: random.Random, kind: str) -> str:
    if kind == "S":
        return "".join(rng.choice("abc") for _ in range(rng.randrange(1, 3)))
    return str(rng.randrange(-8, 34) / 2)


def random_request(rng: random.Random, name: str) -> dict:
    """A Query of a random partition: any operator, either direction, maybe Limit and filter."""
    index = rng.choice(list(SCHEMAS))
    hash_attr, range_attr, kind = SCHEMAS[index]
    part = {None: f"p{rng.randrange(3)}", "by-h": f"h{rng.randrange(2)}"}.get(
        index, f"g{rng.randrange(3)}")
    names, values, cond = {"#h": hash_attr}, {":h": {"S": part}}, "#h = :h"
    op = rng.choice((None,) + OPS) if range_attr else None
    if op == "begins_with" and kind != "S":
        op = "="
    if op:
        names["#r"] = range_attr
        low, high = sorted((operand(rng, kind), operand(rng, kind)),
                           key=float if kind == "N" else str)
        values[":a"] = {kind: low}
        if op == "BETWEEN":
            values[":b"] = {kind: high}
            cond += " AND #r BETWEEN :a AND :b"
        elif op == "begins_with":
            cond += " AND begins_with(#r, :a)"
        else:
            cond += f" AND #r {op} :a"
    request = dict(TableName=name, KeyConditionExpression=cond, ExpressionAttributeNames=names,
                   ExpressionAttributeValues=values, ScanIndexForward=rng.random() < 0.5)
    if index:
        request["IndexName"] = index
    limit = rng.choice([None, 1, 2, 3, 7, 50])
    if limit:
        request["Limit"] = limit
    if rng.random() < 0.3:
        request["FilterExpression"] = "#st = :st"
        names["#st"] = "status"
        values[":st"] = {"S": "done"}
    return request


def answer(client, request: dict, alone: bool = False) -> dict:
    """The Query's response without its metadata; *alone*: as moto answers without the index."""
    from moto.dynamodb.models.table import Table

    from imposer.dev.localstack import index as localindex

    with pytest.MonkeyPatch.context() as patch:
        if alone:
            patch.setattr(Table, "query", localindex._ORIGINAL["query"])
        response = client.query(**request)
    response.pop("ResponseMetadata")
    return response


def same_pages(client, request: dict) -> list[dict]:
    """Follow LastEvaluatedKey to the end, asserting each page is moto's own; return the pages."""
    pages = []
    while True:
        mine = answer(client, request)
        assert mine == answer(client, request, alone=True), (request, len(pages))
        pages.append(mine)
        if "LastEvaluatedKey" not in mine:
            return pages
        request = dict(request, ExclusiveStartKey=mine["LastEvaluatedKey"])


def fill(client, name: str, rng: random.Random, count: int) -> dict[tuple, dict]:
    items = {}
    for n in range(count):
        item = random_item(rng, f"p{rng.randrange(3)}", n)
        client.put_item(TableName=name, Item=item)
        items[(item["pk"]["S"], n)] = item
    return items


class TestPages:
    def test_random_queries_match_moto_alone(self, paged):
        """Every operator, both directions, Limits, filters, all pages: moto's answers exactly."""
        client, name = paged
        rng = random.Random(5)
        fill(client, name, rng, 150)
        pages = [same_pages(client, random_request(rng, name)) for _ in range(150)]
        assert sum(len(p) > 1 for p in pages) > 30  # many were paginated
        assert sum(sum(page["Count"] for page in p) for p in pages) > 500  # and found items

    def test_every_operator_both_ways(self, paged):
        """Each sort key operator on the table and two indexes, forward and back, Limit 2."""
        client, name = paged
        rng = random.Random(6)
        fill(client, name, rng, 80)
        for index in (None, "by-at", "by-n"):
            hash_attr, range_attr, kind = SCHEMAS[index]
            for op in OPS if kind == "S" else OPS[:-1]:
                cond = {"BETWEEN": "#r BETWEEN :a AND :b",
                        "begins_with": "begins_with(#r, :a)"}.get(op, f"#r {op} :a")
                for forward in (True, False):
                    for _ in range(4):
                        low, high = sorted((operand(rng, kind), operand(rng, kind)),
                                           key=float if kind == "N" else str)
                        values = {":h": {"S": "p1" if index is None else "g1"},
                                  ":a": {kind: low}}
                        if op == "BETWEEN":
                            values[":b"] = {kind: high}
                        request = dict(TableName=name, Limit=2, ScanIndexForward=forward,
                                       KeyConditionExpression=f"#h = :h AND {cond}",
                                       ExpressionAttributeNames={"#h": hash_attr,
                                                                 "#r": range_attr},
                                       ExpressionAttributeValues=values)
                        if index:
                            request["IndexName"] = index
                        same_pages(client, request)

    def test_newest_first_between_pages_like_jobs_for_tenant(self, paged):
        """A BETWEEN page newest first, followed to the end, lists the partition in index order."""
        client, name = paged
        items = fill(client, name, random.Random(7), 200)
        request = dict(TableName=name, IndexName="by-n", ScanIndexForward=False, Limit=7,
                       KeyConditionExpression="g = :g AND n BETWEEN :a AND :b",
                       ExpressionAttributeValues={":g": {"S": "g2"}, ":a": {"N": "0"},
                                                  ":b": {"N": "20"}})
        got = [(i["pk"]["S"], int(i["sk"]["N"])) for p in same_pages(client, request)
               for i in p["Items"]]
        wanted = sorted(((float(i["n"]["N"]), k) for k, i in items.items()
                         if i["g"]["S"] == "g2" and "n" in i and 0 <= float(i["n"]["N"]) <= 20),
                        reverse=True)
        assert got == [k for _, k in wanted] and len(got) > 20

    def test_count_and_projection(self, paged):
        """Select COUNT and a projection with a Limit are moto's answers too."""
        client, name = paged
        fill(client, name, random.Random(8), 60)
        base = dict(TableName=name, IndexName="by-at", Limit=4,
                    KeyConditionExpression="g = :g AND #a >= :a",
                    ExpressionAttributeNames={"#a": "at"},
                    ExpressionAttributeValues={":g": {"S": "g0"}, ":a": {"S": "b"}})
        assert same_pages(client, dict(base, Select="COUNT"))[0]["Count"] == 4
        pages = same_pages(client, dict(base, ProjectionExpression="pk, #a"))
        assert all(set(i) == {"pk", "at"} for p in pages for i in p["Items"])

    def test_pages_near_one_megabyte(self, paged):
        """Big items: moto's 1 MB page cap ends pages exactly where it would alone."""
        client, name = paged
        for n in range(14):
            client.put_item(TableName=name, Item={
                "pk": {"S": "p0"}, "sk": {"N": str(n)}, "g": {"S": "g0"},
                "n": {"N": str(n % 5)}, "at": {"S": "b"}, "blob": {"S": "x" * 150_000}})
        for cond, limit in (("n <= :v", 20), ("n < :v", 3), ("n >= :v", None), ("n = :v", 2)):
            for forward in (True, False):
                request = dict(TableName=name, IndexName="by-n", ScanIndexForward=forward,
                               KeyConditionExpression=f"g = :g AND {cond}",
                               ExpressionAttributeValues={":g": {"S": "g0"}, ":v": {"N": "3"}})
                if limit:
                    request["Limit"] = limit
                same_pages(client, request)
        assert len(same_pages(client, dict(TableName=name, KeyConditionExpression="pk = :p",
                                           ExpressionAttributeValues={":p": {"S": "p0"}}))) > 1


class TestWrites:
    def test_puts_updates_deletes_and_moves_between_queries(self, paged):
        """Items added, changed, moved to another partition, stripped of a key, deleted."""
        client, name = paged
        rng = random.Random(9)
        items = fill(client, name, rng, 60)
        for step in range(120):
            pk, sk = rng.choice(list(items)) if items else ("p0", 0)
            op = rng.choice(["put", "move", "strip", "delete"])
            key = {"pk": {"S": pk}, "sk": {"N": str(sk)}}
            if op == "put":
                new_sk = rng.randrange(200)
                item = random_item(rng, pk, new_sk)
                client.put_item(TableName=name, Item=item)
                items[(pk, new_sk)] = item
            elif op == "move":
                client.update_item(TableName=name, Key=key, UpdateExpression="SET g = :g, n = :n",
                                   ExpressionAttributeValues={":g": {"S": f"g{rng.randrange(3)}"},
                                                              ":n": {"N": str(rng.randrange(9))}})
            elif op == "strip":
                client.update_item(TableName=name, Key=key, UpdateExpression="REMOVE #x",
                                   ExpressionAttributeNames={"#x": rng.choice(["at", "n", "h"])})
            else:
                client.delete_item(TableName=name, Key=key)
                items.pop((pk, sk), None)
            same_pages(client, random_request(rng, name))
        for _ in range(40):
            same_pages(client, random_request(rng, name))

    def test_query_after_cancelled_and_committed_transactions(self, paged):
        """A cancelled TransactWriteItems leaves every page as before; a committed one moves it."""
        client, name = paged
        fill(client, name, random.Random(10), 40)
        request = dict(TableName=name, IndexName="by-n", Limit=3,
                       KeyConditionExpression="g = :g AND n >= :a",
                       ExpressionAttributeValues={":g": {"S": "g1"}, ":a": {"N": "-100"}})

        def partition() -> list[tuple]:
            return [(i["pk"]["S"], i["sk"]["N"]) for p in same_pages(client, request)
                    for i in p["Items"]]

        before = partition()
        first = {"pk": {"S": before[0][0]}, "sk": {"N": before[0][1]}}
        writes = [
            {"Put": {"TableName": name, "Item": {"pk": {"S": "new"}, "sk": {"N": "1"},
                                                 "g": {"S": "g1"}, "n": {"N": "-99"}}}},
            {"Update": {"TableName": name, "Key": first, "UpdateExpression": "SET g = :g",
                        "ExpressionAttributeValues": {":g": {"S": "g2"}}}}]
        with pytest.raises(ClientError, match="TransactionCanceled"):
            client.transact_write_items(TransactItems=writes + [
                {"ConditionCheck": {"TableName": name, "Key": {"pk": {"S": "no"},
                                                               "sk": {"N": "0"}},
                                    "ConditionExpression": "attribute_exists(pk)"}}])
        assert partition() == before
        client.put_item(TableName=name, Item={"pk": {"S": "later"}, "sk": {"N": "2"},
                                              "g": {"S": "g1"}, "n": {"N": "1000"}})
        assert partition() == before + [("later", "2")]
        client.transact_write_items(TransactItems=writes)
        assert partition() == [("new", "1")] + before[1:] + [("later", "2")]


class TestCost:
    def test_a_limited_page_reads_limit_items(self, paged, monkeypatch):
        """moto sees at most Limit + 1 items of a 400-item partition, whatever the condition."""
        from moto.dynamodb.models.table import Table

        client, name = paged
        rng = random.Random(12)
        for n in range(400):
            item = random_item(rng, "p0", n)
            item["g"] = {"S": "g0"}
            item["n"] = {"N": str(n)}
            client.put_item(TableName=name, Item=item)
        seen: list[int] = []
        patched = Table.all_items

        def spy(table):
            items = patched(table)
            seen.append(len(items))
            return items

        monkeypatch.setattr(Table, "all_items", spy)
        for cond, forward in (("n BETWEEN :a AND :b", False), ("n >= :a", True),
                              ("n < :b", False), ("n > :a", True)):
            response = client.query(
                TableName=name, IndexName="by-n", Limit=10, ScanIndexForward=forward,
                KeyConditionExpression=f"g = :g AND {cond}",
                ExpressionAttributeValues={k: v for k, v in {
                    ":g": {"S": "g0"}, ":a": {"N": "100"}, ":b": {"N": "300"}}.items()
                    if k[1:] in cond or k == ":g"})
            assert response["Count"] == 10 and "LastEvaluatedKey" in response
        client.query(TableName=name, Limit=5, KeyConditionExpression="pk = :p AND sk > :s",
                     ExpressionAttributeValues={":p": {"S": "p0"}, ":s": {"N": "17"}})
        assert seen == [11, 11, 11, 11, 6]
