"""Completion webhooks: signed, sent only to public hosts the tenant allowed.

The signature is ``imposer.models.signature`` (the same code the client's
``verify_webhook`` checks with). Where a webhook may go is decided by
``urlguard`` (the SSRF guard).
"""

from __future__ import annotations

import hashlib
import heapq
import http.client
import itertools
import json
import logging
import queue
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterable

import attrs

from imposer import logs
from imposer.models import signature
from imposer.webhooks.urlguard import WebhookRefused, check_url, pinned_opener

logger = logging.getLogger(__name__)

EVENT_FIELDS = ("job_id", "tenant_id", "token", "status", "output", "error", "error_kind",
                "submitted_at", "started_at", "finished_at", "queue_wait", "run_seconds")
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


def build_event(*, job_id: str, tenant_id: str, status: Any, **fields: Any) -> dict[str, Any]:
    """Return the completion event a tenant receives; absent fields are null."""
    unknown = set(fields) - set(EVENT_FIELDS)
    if unknown:
        raise TypeError(f"unknown event fields: {', '.join(sorted(unknown))}")
    event = {name: fields.get(name) for name in EVENT_FIELDS}
    event.update(job_id=job_id, tenant_id=tenant_id, status=getattr(status, "value", status))
    return event


def event_id(event: dict[str, Any]) -> str:
    """Return the webhook-id of a job's completion event: the same on every retry."""
    key = f"{event.get('tenant_id')}\n{event.get('job_id')}".encode()
    return "msg_" + hashlib.sha256(key).hexdigest()[:32]


@attrs.frozen(kw_only=True)
class Delivery:
    """One event waiting to be delivered, and how many attempts it has had."""

    url: str
    event: dict
    secret: str
    allowed_hosts: tuple[str, ...]
    attempt: int = 0


_STOP = object()


class Notifier:
    """Deliver webhooks from one background thread, retrying with exponential backoff.

    Retries wait in a schedule rather than in a sleep, so one tenant's failing
    receiver does not hold back other tenants' events; one slow receiver still
    delays the queue by at most *timeout* per attempt.
    """

    def __init__(self, on_result: Callable[[str, str, str], Any] | None = None, *,
                 attempts: int = 5, base_delay: float = 2.0, max_delay: float = 300.0,
                 timeout: float = 10.0, allow_http_loopback: bool = False,
                 resolve: Callable[..., list] = socket.getaddrinfo,
                 clock: Callable[[], float] = time.time,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.on_result = on_result
        self.attempts, self.base_delay, self.max_delay = attempts, base_delay, max_delay
        self.timeout, self.allow_http_loopback, self.resolve = timeout, allow_http_loopback, resolve
        self.clock = clock
        self.ssl_context = ssl_context or ssl.create_default_context()
        self._queue: queue.Queue = queue.Queue()
        self._retries: list[tuple[float, int, Delivery]] = []
        self._order = itertools.count()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="imposer-webhooks", daemon=True)

    def start(self) -> "Notifier":
        self._thread.start()
        return self

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def notify(self, url: str, event: dict, secret: str, allowed_hosts: Iterable[str]) -> None:
        """Queue *event* for delivery to *url*; the result comes through on_result."""
        self._queue.put(Delivery(url=url, event=event, secret=secret,
                                 allowed_hosts=tuple(allowed_hosts)))

    def stop(self, timeout: float | None = None) -> bool:
        """Deliver what is queued (retries included) for up to *timeout*; say if all was sent.

        Past the timeout, whatever is left is reported failed, not attempted.
        """
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._halt.set()
            self._queue.put(_STOP)  # wake a thread waiting for the next retry
            self._thread.join(self.timeout + 1.0)
            return False
        return True

    def _run(self) -> None:
        stopping = False
        while not (stopping and not self._retries and self._queue.empty()):
            try:
                stopping = self._step() or stopping
            except Exception:
                logger.exception("webhook notifier pass failed", extra=logs.extra("webhook_error"))

    def _step(self) -> bool:
        """Attempt one delivery (a due retry first); return True on the stop signal."""
        if self._retries and (self._halt.is_set() or self._retries[0][0] <= time.monotonic()):
            self._attempt(heapq.heappop(self._retries)[2])
            return False
        wait = max(0.0, self._retries[0][0] - time.monotonic()) if self._retries else None
        try:
            item = self._queue.get(timeout=wait)
        except queue.Empty:
            return False
        if item is _STOP:
            return True
        self._attempt(item)
        return False

    def _attempt(self, job: Delivery) -> None:
        if self._halt.is_set():
            return self._finish(job, "failed", "notifier stopped before delivery")
        if not job.secret:
            return self._finish(job, "refused", "tenant has no webhook secret")
        job = attrs.evolve(job, attempt=job.attempt + 1)
        try:
            target = check_url(job.url, job.allowed_hosts, self.allow_http_loopback, self.resolve)
            body = json.dumps(job.event, sort_keys=True, separators=(",", ":")).encode()
            headers = {"Content-Type": "application/json", "User-Agent": "imposer-webhooks",
                       **signature.sign(job.secret, body, self.clock(), event_id(job.event))}
            request = urllib.request.Request(job.url, data=body, headers=headers, method="POST")
            with pinned_opener(target, self.ssl_context).open(request, timeout=self.timeout) as reply:
                reply.read(65536)
                code = reply.status
        except WebhookRefused as exc:
            return self._finish(job, "refused", str(exc))
        except urllib.error.HTTPError as exc:
            exc.close()
            code, reason = exc.code, f"HTTP {exc.code}"
            if code not in _RETRY_STATUS:
                return self._finish(job, "failed", f"{reason} on attempt {job.attempt}")
        except (OSError, http.client.HTTPException) as exc:
            reason = f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
        except Exception as exc:  # a bug or a bad event must still end in a result
            logger.exception("webhook attempt crashed", extra=self._extra("webhook_error", job))
            return self._finish(job, "failed", f"internal error: {exc!r}")
        else:
            return self._finish(job, "delivered", f"HTTP {code} on attempt {job.attempt}")
        if job.attempt >= self.attempts:
            return self._finish(job, "failed", f"{reason} after {job.attempt} attempts")
        delay = min(self.max_delay, self.base_delay * 2 ** (job.attempt - 1))
        logger.info("webhook attempt %d failed (%s); retrying in %.1f s", job.attempt, reason,
                    delay, extra=self._extra("webhook_retry", job))
        heapq.heappush(self._retries, (time.monotonic() + delay, next(self._order), job))

    def _finish(self, job: Delivery, status: str, detail: str) -> None:
        level = logging.INFO if status == "delivered" else logging.WARNING
        logger.log(level, "webhook %s: %s", status, detail,
                   extra=self._extra(f"webhook_{status}", job))
        if self.on_result is None:
            return
        try:
            self.on_result(str(job.event.get("job_id")), status, detail)
        except Exception:
            logger.exception("webhook result callback failed",
                             extra=self._extra("webhook_error", job))

    @staticmethod
    def _extra(action: str, job: Delivery) -> dict:
        return logs.extra(action, job.event.get("tenant_id"), job.event.get("job_id"))
