"""Check that a completion webhook really comes from imposer, and is fresh.

The signature scheme lives in ``imposer.models.signature`` (shared with the
service, so the two sides cannot drift): Standard Webhooks headers
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``), which any
language's off-the-shelf verifier checks, and imposer's first scheme
(``X-Imposer-Timestamp``, ``X-Imposer-Signature``), still accepted.
"""

from __future__ import annotations

import json
from typing import Any

from imposer.client.errors import WebhookVerificationError
from imposer.models import signature
from imposer.models.signature import Headers


def verify_webhook(headers: Headers, body: bytes, secret: str | bytes, tolerance: float = 300,
                   now: float | None = None) -> dict[str, Any]:
    """Return the webhook's event if it is signed with *secret* and recent.

    Pass the raw request body exactly as received: any re-encoding of the
    JSON breaks the signature. Raise WebhookVerificationError otherwise.
    """
    try:
        signature.verify(headers, body, secret, tolerance, now)
    except signature.SignatureError as exc:
        raise WebhookVerificationError(str(exc)) from None
    try:
        event = json.loads(body)
    except ValueError:
        raise WebhookVerificationError("body is not JSON") from None
    if not isinstance(event, dict):
        raise WebhookVerificationError("body is not a JSON object")
    return event
