"""Check that a completion webhook really comes from imposer, and is fresh.

The service signs ``f"{timestamp}.".encode() + body`` with HMAC-SHA256 under
the tenant's secret and sends two headers::

    X-Imposer-Timestamp: 1700000000
    X-Imposer-Signature: v1=<hex digest>[,v1=<hex digest>...]

Several ``v1=`` values may be listed (e.g. while a secret is rotated); one
match is enough. The timestamp bounds replay: a captured request is
refused once it is older (or newer) than *tolerance* seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, Iterable, Mapping, Union

from imposer.client.errors import WebhookVerificationError

TIMESTAMP_HEADER = "X-Imposer-Timestamp"
SIGNATURE_HEADER = "X-Imposer-Signature"
SCHEME = "v1"

Headers = Union[Mapping[str, str], Iterable[tuple[str, str]]]


def signature(secret: str | bytes, body: bytes, timestamp: int) -> str:
    """Return the hex HMAC-SHA256 of one signed payload."""
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def _header(headers: Headers, name: str) -> str | None:
    """Find a header whatever its case, in a dict, an HTTPMessage or (name, value) pairs."""
    pairs = headers.items() if hasattr(headers, "items") else headers
    wanted = name.lower()
    for key, value in pairs:
        if key.lower() == wanted:
            return value
    return None


def verify_webhook(headers: Headers, body: bytes, secret: str | bytes, tolerance: float = 300,
                   now: float | None = None) -> dict[str, Any]:
    """Return the webhook's event if it is signed with *secret* and recent.

    Pass the raw request body exactly as received: any re-encoding of the
    JSON breaks the signature. Raise WebhookVerificationError otherwise.
    """
    if not secret:
        raise WebhookVerificationError("no webhook secret configured")
    stamp = _header(headers, TIMESTAMP_HEADER)
    signed = _header(headers, SIGNATURE_HEADER)
    if stamp is None or signed is None:
        raise WebhookVerificationError(
            f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER} header")
    try:
        timestamp = int(stamp.strip())
    except ValueError:
        raise WebhookVerificationError(f"{TIMESTAMP_HEADER} is not epoch seconds") from None
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        raise WebhookVerificationError(
            f"timestamp is {now - timestamp:.0f} s away from now (tolerance {tolerance:g} s)")
    expected = signature(secret, body, timestamp)
    offered = [v.strip()[len(SCHEME) + 1:] for v in signed.split(",")
               if v.strip().startswith(SCHEME + "=")]
    if not offered:
        raise WebhookVerificationError(f"{SIGNATURE_HEADER} has no {SCHEME}= signature")
    if not any(hmac.compare_digest(expected.encode(), o.encode()) for o in offered):
        raise WebhookVerificationError("signature does not match the body and secret")
    try:
        event = json.loads(body)
    except ValueError:
        raise WebhookVerificationError("body is not JSON") from None
    if not isinstance(event, dict):
        raise WebhookVerificationError("body is not a JSON object")
    return event
