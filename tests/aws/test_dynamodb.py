"""The DynamoDB adapter's transactions: per-item reasons, and a DEBUG line for each one."""

from __future__ import annotations

import logging

import pytest

from imposer.aws.dynamodb import TransactionCancelled, op


class TestTransact:
    def test_a_cancelled_transaction_says_which_item_failed_and_logs_it(self, backends,
                                                                        settings, caplog):
        """The second item's condition fails: its reason is ConditionalCheckFailed, the
        first's None; at DEBUG both outcomes are logged with what the transaction was for."""
        dynamo, table = backends.waiting.dynamo, settings.waiting_table
        item = {"tenant_id": "acme", "order": "1"}
        caplog.set_level(logging.DEBUG, logger="imposer.aws.dynamodb")
        dynamo.transact([op("Put", table, item)], "first put")
        with pytest.raises(TransactionCancelled) as refused:
            dynamo.transact([op("Put", table, {**item, "order": "2"}),
                             op("Put", table, item, condition="attribute_not_exists(#o)",
                                names={"#o": "order"})], "second put")
        assert [r.code for r in refused.value.reasons] == ["None", "ConditionalCheckFailed"]
        lines = {(r.action, r.what, tuple(getattr(r, "reasons", ()))) for r in caplog.records
                 if r.name == "imposer.aws.dynamodb"}
        assert lines == {("transaction", "first put", ()),
                         ("transaction_cancelled", "second put",
                          ("None", "ConditionalCheckFailed"))}
        assert dynamo.get(table, {"tenant_id": "acme", "order": "2"}) is None, \
            "nothing of a cancelled transaction is written"
