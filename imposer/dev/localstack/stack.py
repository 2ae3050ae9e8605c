"""The embedded local AWS stack: moto's server with serializable DynamoDB.

moto applies ``TransactWriteItems`` by deep-copying the tables it touches and
restoring them on failure, without a lock: under concurrent clients the cap is
broken and committed writes are lost. Real DynamoDB is serializable, so this
stack runs every DynamoDB request under one lock, while SQS long polls and S3
transfers stay concurrent.

moto also returns a standard queue's messages strictly in send order, so a
quiet tenant's job waits behind every deferred message of a noisy tenant's
backlog. SQS fair queues (layer 1) deprioritise a noisy message group in
favour of quieter ones; this stack approximates that by ordering visible
messages by how many messages their group already has in flight (deferred
messages are in flight too), keeping each group's own order.

moto stamps every message with one made-up ``SenderId``, whoever sent it.
SQS stamps the sender's principal, the ``UserId`` STS gives the same
credentials (an IAM user's id, a role's id and session), and imposer
refuses a message whose sender is not bound to its tenant; this stack
stamps what STS says of the request's access key, as SQS does.

S3 refuses a ``CopyObject`` with ``If-None-Match: *`` onto a key that holds an
object (412), as it refuses such a ``PutObject``; moto checks the condition on
puts only, and without a lock, so two hosts promoting one plate at once both
wrote a version of it. This stack checks both, each check and its write under
one lock.

A bucket made by ``imposer init`` denies requests not made over TLS, as the
template's does; moto cannot evaluate that condition and would deny every
request. Requests to this stack stand for HTTPS requests to AWS, so a
statement that applies only to plain HTTP never applies here.

And moto answers a Query by sorting and filtering the whole table;
``localindex`` makes a Query read only its page, O(log n + limit), as DynamoDB
does; and ``localtxn`` makes a transaction copy the items it writes rather
than every table it names, so its cost does not grow with history either.
The stack has DynamoDB's cost shape, and scale benchmarks measure imposer
rather than moto.
"""

from __future__ import annotations

import collections
import logging
import threading

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from imposer.dev.localstack import index as localindex, txn as localtxn

logger = logging.getLogger(__name__)


def _fair_messages(queue) -> list:
    """Visible messages, the groups with fewest in flight first (a stable sort)."""
    visible = [m for m in queue._messages if m.visible and not m.delayed]
    if queue.fifo_queue:
        return visible
    in_flight = collections.Counter(m.group_id for m in queue._messages if not m.visible)
    return sorted(visible, key=lambda m: in_flight[m.group_id] if m.group_id else 0)


def use_fair_queues() -> None:
    """Make moto's standard queues deliver like SQS fair queues (see the module doc)."""
    from moto.sqs.models import Queue

    Queue.messages = property(_fair_messages)


_sending = threading.local()


def use_real_senders() -> None:
    """Make moto stamp each sent message with its sender's principal (see the module doc)."""
    from moto.sqs import models
    from moto.sqs.responses import SQSResponse
    from moto.sts.models import sts_backends

    if getattr(SQSResponse, "_imposer_senders", False):
        return
    made = models.Message.__init__

    def init(self, *args, **kwargs) -> None:
        made(self, *args, **kwargs)
        sender = getattr(_sending, "sender", None)
        if sender:
            self.sender_id = sender

    def stamped(send):
        def wrapper(self):
            backend = sts_backends[self.current_account]["aws"]
            _sending.sender = backend.get_caller_identity(self.get_access_key(), self.region)[0]
            try:
                return send(self)
            finally:
                _sending.sender = None
        return wrapper

    models.Message.__init__ = init
    SQSResponse.send_message = stamped(SQSResponse.send_message)
    SQSResponse.send_message_batch = stamped(SQSResponse.send_message_batch)
    SQSResponse._imposer_senders = True


_writing = threading.Lock()


def conditional_writes() -> None:
    """Make moto refuse a put or copy with ``If-None-Match: *`` onto an object, atomically."""
    from moto.s3.exceptions import PreconditionFailed
    from moto.s3.responses import S3Response

    if getattr(S3Response, "_imposer_conditional", False):
        return

    def conditional(write):
        def wrapper(self):
            if self.headers.get("If-None-Match") != "*":
                return write(self)
            with _writing:
                if self.backend.get_object(self.bucket_name, self.parse_key_name()) is not None:
                    raise PreconditionFailed("If-None-Match")
                return write(self)
        return wrapper

    S3Response.copy_object = conditional(S3Response.copy_object)
    S3Response.put_object = conditional(S3Response.put_object)
    S3Response._imposer_conditional = True


def as_if_over_tls() -> None:
    """Let no ``aws:SecureTransport`` = false statement apply (see the module doc)."""
    from moto.iam.access_control import IAMPolicyStatement, PermissionResult

    if getattr(IAMPolicyStatement, "_imposer_tls", False):
        return
    permits = IAMPolicyStatement.is_action_permitted

    def over_tls(self, action, resource="*", principal=None, incoming_condition_values=None):
        condition = self._statement.get("Condition") or {}
        if str(condition.get("Bool", {}).get("aws:SecureTransport")).lower() == "false":
            return PermissionResult.NEUTRAL
        return permits(self, action, resource, principal, incoming_condition_values)

    IAMPolicyStatement.is_action_permitted = over_tls
    IAMPolicyStatement._imposer_tls = True


class SerializeDynamoDB:
    """WSGI middleware: hold one lock around every ``DynamoDB_*`` request."""

    def __init__(self, app) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            with self.lock:
                # Materialise the body inside the lock: the work happens lazily.
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


class _QuietHandler(WSGIRequestHandler):
    """Drop werkzeug's line per request."""

    def log_request(self, *args, **kwargs) -> None:
        pass


class LocalStack:
    """Serve moto on 127.0.0.1:*port* (0 picks a free port) in a thread or the foreground."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", fair_queues: bool = True) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            create_backend_app,
        )

        if fair_queues:
            use_fair_queues()
        use_real_senders()
        conditional_writes()
        as_if_over_tls()
        localindex.install()
        localtxn.install()
        app = SerializeDynamoDB(DomainDispatcherApplication(create_backend_app))
        self.server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=_QuietHandler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "LocalStack":
        self._thread = threading.Thread(target=self.server.serve_forever, name="localstack",
                                        daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread:
            self._thread.join(timeout=5)
