"""The shared botocore set-up: AWS failures become imposer's own errors, transient or not."""

from __future__ import annotations

import os
import time

import pytest

from imposer.aws import session
from imposer.aws.dynamodb import Dynamo
from imposer.aws.sqs import JobQueue
from imposer.errors import BackendError, TransientBackendError
from tests.fixtures.faultproxy import FaultProxy


@pytest.fixture
def proxy(settings, monkeypatch):
    """A fault proxy in front of the local stack that this process's new clients go through."""
    running = FaultProxy(os.environ["AWS_ENDPOINT_URL"], "session").start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", running.url)
    yield running
    running.stop()


class TestTranslated:
    def test_sqs_throttling_is_transient(self, settings, proxy):
        """SQS's RequestThrottled (HTTP 400) that outlasts botocore's retries is transient."""
        proxy.inject("throttle", 600, service="sqs")
        with pytest.raises(TransientBackendError, match="RequestThrottled"):
            JobQueue(settings.region, settings.queue_name, settings.dlq_name).url()
        assert proxy.injected[("sqs", "throttle")] > 1, "botocore did not retry it first"

    def test_a_refusal_is_not_transient(self, settings):
        """An error no retry can fix (a table that does not exist) is not transient."""
        with pytest.raises(BackendError) as refused:
            Dynamo(settings.region).get(f"{settings.table_prefix}-nothing", {"pk": "x"})
        assert not isinstance(refused.value, TransientBackendError)


class TestCallerIdentity:
    def test_the_reply_comes_with_the_times_around_the_call(self, settings):
        """STS names the principal; the send and reply times bracket the call, in order."""
        before = time.time()
        reply, sent, received = session.caller_identity(settings.region)
        assert reply["Arn"].startswith("arn:aws:")
        assert before <= sent <= received <= time.time()
