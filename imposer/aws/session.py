"""Shared botocore set-up for the three AWS adapters (queue, dynamo, storage).

Clients retry throttling with botocore's standard mode; this module turns
botocore's failures into imposer's own exceptions so that nothing above the
adapters sees ``ClientError``. ``caller_identity`` (STS) is here too: only
`imposer doctor` asks it, to name the principal and compare clocks.
"""

from __future__ import annotations

import collections
import contextlib
import os
import socket
import threading
import time
import urllib.parse
from typing import Iterator

import boto3
import botocore.config
import botocore.exceptions
import botocore.loaders
import botocore.parsers
import botocore.session

from imposer.errors import (
    BackendError,
    ConfigError,
    EndpointUnreachable,
    MissingResource,
    TransientBackendError,
)

_MISSING = {
    "ResourceNotFoundException",
    "QueueDoesNotExist",
    "AWS.SimpleQueueService.NonExistentQueue",
    "NoSuchBucket",
}
_TRANSIENT = {
    "ThrottlingException",
    "Throttling",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "RequestThrottled",  # SQS
    "TransactionConflictException",
    "TransactionInProgressException",
    "InternalServerError",
    "ServiceUnavailable",
    "SlowDown",
}


class CallCounter:
    """Count AWS API calls by operation, and DynamoDB's by table, for the stop log and audits.

    Keys are ``sqs.ReceiveMessage`` and, for DynamoDB, ``dynamodb.Query@<table>`` (an
    index read counts against its table), so a test can tell a Scan of the jobs
    table from one of the small leases table.
    """

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self._lock = threading.Lock()

    def __call__(self, params=None, model=None, **kwargs) -> None:
        if model is None:
            return
        key = f"{model.service_model.service_name}.{model.name}"
        table = (params or {}).get("TableName") if isinstance(params, dict) else None
        with self._lock:
            self.counts[f"{key}@{table}" if table else key] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()


#: Where `imposer local` listens unless told otherwise.
LOCAL_PORT = 4566

#: Every call made by clients of this process.
CALLS = CallCounter()


class _Paths(list):
    """A loader's search paths that boto3 may append its own to at every session."""

    def append(self, path) -> None:
        if path not in self:
            super().append(path)


class _SharedLoader(botocore.loaders.Loader):
    """botocore's service models, read from disk once per process and shared by the
    sessions ``client`` makes (a session of its own reads them again: about 60 ms a
    client, most of a test's set-up and of a command's start)."""

    def __init__(self) -> None:
        super().__init__(extra_search_paths=[os.path.join(os.path.dirname(boto3.__file__),
                                                          "data")])
        self._search_paths = _Paths(self._search_paths)


_LOADER = _SharedLoader()


def _session() -> boto3.session.Session:
    """A new session, so credentials and region come from the environment as it is now,
    with the process's one model loader (botocore's own where ``AWS_DATA_PATH`` or the
    config file's ``data_path`` adds models)."""
    core = botocore.session.Session()
    if core.get_config_variable("data_path") is None:
        core.register_component("data_loader", _LOADER)
    return boto3.session.Session(botocore_session=core)


def client(service: str, region: str, read_timeout: float = 30.0, retries: int = 5):
    """Make a boto3 client with standard retries (*retries* after the first try: botocore's
    ``max_attempts``); AWS_ENDPOINT_URL is honoured by boto3."""
    config = botocore.config.Config(
        region_name=region,
        retries={"mode": "standard", "max_attempts": retries},
        connect_timeout=5,
        read_timeout=read_timeout,
        max_pool_connections=20,
    )
    check_endpoint()
    try:
        made = _session().client(service, config=config)
    except ValueError as exc:  # botocore's word for a malformed endpoint or region
        raise ConfigError(f"cannot make an AWS client for {service} in region {region!r} at "
                          f"{endpoint()}: {exc}") from None
    made.meta.events.register("before-parameter-build", CALLS)
    return made


def caller_identity(region: str) -> tuple[dict, float, float]:
    """Ask STS who our credentials are; also when the request left and the reply came (epoch s).

    The two times bracket the call alone, not the client's making, so the
    reply's ``Date`` header can be held against this host's clock.
    """
    sts = client("sts", region)
    sent = time.time()
    with translated("read the caller identity"):
        reply = sts.get_caller_identity()
    return reply, sent, time.time()


def endpoint() -> str:
    return os.environ.get("AWS_ENDPOINT_URL") or "the AWS default endpoint"


def check_endpoint() -> None:
    """Refuse an AWS_ENDPOINT_URL that is not ``http(s)://host[:port]``, before botocore does.

    botocore takes ``http://host:4566 `` (a trailing space) and fails in the
    middle of the first request; this says what is wrong, once, for every command.
    """
    raw = os.environ.get("AWS_ENDPOINT_URL")
    if not raw:
        return
    want = f"AWS_ENDPOINT_URL {raw[:200]!r} is not a URL like http://127.0.0.1:4566"
    if raw != raw.strip() or any(c.isspace() or ord(c) < 32 for c in raw):
        raise ConfigError(f"{want}: it holds spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(raw)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ConfigError(f"{want}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{want}: want http:// or https:// and a host")


def local_stack_hint() -> str:
    """When no endpoint is set and something listens where `imposer local` does, say so."""
    if os.environ.get("AWS_ENDPOINT_URL"):
        return ""
    try:
        with socket.create_connection(("127.0.0.1", LOCAL_PORT), timeout=0.2):
            pass
    except OSError:
        return ""
    return (f"; something listens at http://127.0.0.1:{LOCAL_PORT}: for `imposer local`, "
            f"export the AWS_ENDPOINT_URL and test credentials it prints")


def error_code(exc: botocore.exceptions.ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Re-raise botocore errors of the block as imposer errors naming *what*."""
    try:
        yield
    except botocore.exceptions.EndpointConnectionError:
        raise EndpointUnreachable(
            f"cannot reach {endpoint()} for {what} (is `imposer local` running?)"
        ) from None
    except botocore.exceptions.NoCredentialsError:
        raise ConfigError(f"no AWS credentials for {what} (set AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY, a profile, or an instance role)"
                          + local_stack_hint()) from None
    except botocore.parsers.ResponseParserError:
        raise BackendError(f"{what}: {endpoint()} answered with something that is not an AWS "
                           "API reply (is AWS_ENDPOINT_URL right?)") from None
    except botocore.exceptions.ClientError as exc:
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message") or ""
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        page = message.lstrip().startswith("<")
        if page or code in ("", str(status)):  # botocore's code is the status when none came
            came = "a web page" if page else "no AWS error code"
            message = (f"{endpoint()} answered HTTP {status} with {came}, not an AWS API "
                       "reply (is AWS_ENDPOINT_URL right?)")
        if code in _MISSING:
            raise MissingResource(f"{what}: {message} (run `imposer init`)") from None
        if code in _TRANSIENT or status >= 500:
            raise TransientBackendError(f"{what}: {code}: {message}") from None
        raise BackendError(f"{what}: {code}: {message}") from None
    except botocore.exceptions.HTTPClientError as exc:  # timeouts, dropped connections
        raise TransientBackendError(f"{what}: {exc}") from None
