"""One delivery attempt of a completion webhook: signed, sent only where the guard allows.

The signature is ``imposer.models.signature`` (the same code the client's
``verify_webhook`` checks with); where a request may go is ``urlguard``'s
decision. The attempt's result says what should happen next: done
(delivered), try again later (a 5xx, 408, 425, 429 or a network error), or
never (refused by the guard, another 4xx, a redirect). Retrying on a
schedule and surviving crashes is the outbox's job, not this module's.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterable, Sequence

import attrs

from imposer.models import WebhookStatus, signature
from imposer.webhooks.urlguard import WebhookRefused, check_url, pinned_opener

logger = logging.getLogger(__name__)

EVENT_FIELDS = ("job_id", "tenant_id", "token", "status", "output", "error", "error_kind",
                "submitted_at", "started_at", "finished_at", "queue_wait", "run_seconds",
                "warnings")
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


def build_event(*, job_id: str, tenant_id: str, status: Any, **fields: Any) -> dict[str, Any]:
    """Return the completion event a tenant receives; absent fields are null."""
    unknown = set(fields) - set(EVENT_FIELDS)
    if unknown:
        raise TypeError(f"unknown event fields: {', '.join(sorted(unknown))}")
    event = {name: fields.get(name) for name in EVENT_FIELDS}
    event.update(job_id=job_id, tenant_id=tenant_id, status=getattr(status, "value", status))
    return event


def encode(event: dict[str, Any]) -> str:
    """Return the event's body: compact, sorted JSON, the bytes that get signed."""
    return json.dumps(event, sort_keys=True, separators=(",", ":"))


@attrs.frozen(kw_only=True)
class Result:
    """What one attempt came to."""

    #: delivered, retry (may pass), failed (will not pass), refused (the guard said no).
    status: str
    detail: str


class WebhookSender:
    """Send one signed POST to a checked address; never raise, say what happened."""

    def __init__(self, *, timeout: float = 10.0, allow_http_loopback: bool = False,
                 resolve: Callable[..., list] = socket.getaddrinfo,
                 clock: Callable[[], float] | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.timeout, self.allow_http_loopback, self.resolve = timeout, allow_http_loopback, resolve
        self.clock = clock or time.time
        self.ssl_context = ssl_context or ssl.create_default_context()

    def send(self, url: str, body: str, secret: str | Sequence[str], event_id: str,
             allowed_hosts: Iterable[str]) -> Result:
        """POST *body* signed with *secret* (or each of several, while one is rotated)."""
        if isinstance(secret, str):
            secret = (secret,) if secret else ()
        if not secret:
            return Result(status=WebhookStatus.REFUSED, detail="tenant has no webhook secret")
        try:
            target = check_url(url, allowed_hosts, self.allow_http_loopback, self.resolve)
            data = body.encode()
            headers = {"Content-Type": "application/json", "User-Agent": "imposer-webhooks",
                       **signature.sign(secret, data, self.clock(), event_id)}
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            with pinned_opener(target, self.ssl_context).open(request,
                                                              timeout=self.timeout) as reply:
                reply.read(65536)
                return Result(status=WebhookStatus.DELIVERED, detail=f"HTTP {reply.status}")
        except WebhookRefused as exc:
            return Result(status=WebhookStatus.REFUSED, detail=str(exc))
        except urllib.error.HTTPError as exc:
            exc.close()
            return Result(status=WebhookStatus.RETRY if exc.code in _RETRY_STATUS
                          else WebhookStatus.FAILED, detail=f"HTTP {exc.code}")
        except (OSError, http.client.HTTPException) as exc:
            return Result(status=WebhookStatus.RETRY,
                          detail=f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}")
        except Exception as exc:  # a bug must still end in a result, never kill the sender
            logger.exception("webhook attempt crashed", extra={"action": "webhook_error"})
            return Result(status=WebhookStatus.FAILED, detail=f"internal error: {exc!r}")
