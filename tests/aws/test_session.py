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


class TestClients:
    def test_each_client_reads_the_environment_as_it_is_now(self, settings, monkeypatch):
        """Clients share the process's model loader, not a session: keys and region set
        after one client was made are the next client's (``aws_as`` and the IAM tests
        rely on it), and each works against the stack."""
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first")
        first = session.client("sqs", "us-east-1")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "second")
        second = session.client("sqs", "eu-west-1")
        assert first._get_credentials().access_key == "first"
        assert second._get_credentials().access_key == "second"
        assert (first.meta.region_name, second.meta.region_name) == ("us-east-1", "eu-west-1")
        assert second.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200

    def test_the_shared_loader_does_not_grow_with_the_clients_made(self, settings):
        """boto3 adds its data path at every session; the shared loader keeps one of each,
        so a worker making clients for months holds what it held after the first."""
        session.client("s3", settings.region)
        paths = list(session._LOADER.search_paths)
        for _ in range(20):
            session.client("dynamodb", settings.region)
        assert session._LOADER.search_paths == paths
        assert len(set(paths)) == len(paths)

    def test_models_an_operator_adds_are_read(self, monkeypatch, tmp_path):
        """AWS_DATA_PATH (extra service models) gets botocore's own loader, which reads it;
        without it, every session shares the one loader."""
        assert session._session()._loader is session._LOADER
        monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
        own = session._session()._loader
        assert own is not session._LOADER and str(tmp_path) in own.search_paths
