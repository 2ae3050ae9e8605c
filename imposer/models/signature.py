"""The webhook signature, written once: the service signs with it, the client verifies.

Two header sets go on every delivery, so receivers built for either work:

* **Standard Webhooks** (standardwebhooks.com, what off-the-shelf verifiers in
  most languages check): ``webhook-id``, ``webhook-timestamp`` and
  ``webhook-signature: v1,<base64 HMAC-SHA256(key, f"{id}.{timestamp}.{body}")>``.
  A ``whsec_<base64>`` secret's key is the decoded bytes; any other secret's
  key is its UTF-8 bytes.
* **imposer's own, first scheme**: ``X-Imposer-Timestamp`` and
  ``X-Imposer-Signature: v1=<hex HMAC-SHA256(secret, f"{timestamp}." + body)>``.

While a secret is rotated the delivery is signed with both the new and the
previous secret, several signatures in one header (space-separated in
``webhook-signature``, as Standard Webhooks lists them; comma-separated in
``X-Imposer-Signature``); a receiver holding either secret finds its match. The timestamp bounds replay: a request older or newer
than the tolerance is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from typing import Iterable, Mapping, Union

ID_HEADER = "webhook-id"
STANDARD_TIMESTAMP = "webhook-timestamp"
STANDARD_SIGNATURE = "webhook-signature"
LEGACY_TIMESTAMP = "X-Imposer-Timestamp"
LEGACY_SIGNATURE = "X-Imposer-Signature"
SECRET_PREFIX = "whsec_"

Headers = Union[Mapping[str, str], Iterable[tuple[str, str]]]


class SignatureError(ValueError):
    """A webhook request is unsigned, wrongly signed, malformed or too old to trust."""


def new_secret() -> str:
    """Return a fresh Standard Webhooks secret (``whsec_`` + 32 random bytes, base64)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def key_of(secret: str | bytes) -> bytes:
    """Return the HMAC key of a secret as Standard Webhooks defines it."""
    if isinstance(secret, bytes):
        return secret
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)
        except binascii.Error:
            raise SignatureError("a whsec_ secret must be base64 after its prefix") from None
    return secret.encode()


def _standard(secret: str | bytes, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key_of(secret), signed, hashlib.sha256).digest()).decode()


def _legacy(secret: str | bytes, timestamp: int, body: bytes) -> str:
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str | bytes | Iterable[str | bytes], body: bytes, timestamp: float,
         message_id: str) -> dict[str, str]:
    """Return the headers that prove *body* came from imposer at *timestamp*.

    *secret* may be several secrets (the new one first, then the one being
    rotated out): each signs, and each signature is listed.
    """
    keys = [secret] if isinstance(secret, (str, bytes)) else [s for s in secret if s]
    if not keys:
        raise SignatureError("no webhook secret to sign with")
    stamp = int(timestamp)
    return {
        ID_HEADER: message_id,
        STANDARD_TIMESTAMP: str(stamp),
        STANDARD_SIGNATURE: " ".join(f"v1,{_standard(k, message_id, stamp, body)}"
                                     for k in keys),
        LEGACY_TIMESTAMP: str(stamp),
        LEGACY_SIGNATURE: ",".join(f"v1={_legacy(k, stamp, body)}" for k in keys),
    }


def header(headers: Headers, name: str) -> str | None:
    """Find a header whatever its case, in a dict, an HTTPMessage or (name, value) pairs."""
    pairs = headers.items() if hasattr(headers, "items") else headers
    wanted = name.lower()
    for key, value in pairs:
        if key.lower() == wanted:
            return value
    return None


def verify(headers: Headers, body: bytes, secret: str | bytes, tolerance: float = 300,
           now: float | None = None) -> None:
    """Return if *body* is signed with *secret* under either scheme and is recent.

    Pass the raw request body exactly as received: any re-encoding of the
    JSON breaks the signature. Raise SignatureError otherwise.
    """
    if not secret:
        raise SignatureError("no webhook secret configured")
    message_id = header(headers, ID_HEADER)
    standard = header(headers, STANDARD_SIGNATURE)
    if message_id is not None and standard is not None:
        stamp = _timestamp(header(headers, STANDARD_TIMESTAMP), STANDARD_TIMESTAMP, tolerance, now)
        expected = _standard(secret, message_id, stamp, body)
        offered = [v.split(",", 1)[1] for v in standard.split() if v.startswith("v1,")]
    else:
        legacy = header(headers, LEGACY_SIGNATURE)
        if legacy is None:
            raise SignatureError(f"missing {STANDARD_SIGNATURE} (or {LEGACY_SIGNATURE}) header")
        stamp = _timestamp(header(headers, LEGACY_TIMESTAMP), LEGACY_TIMESTAMP, tolerance, now)
        expected = _legacy(secret, stamp, body)
        offered = [v.strip()[3:] for v in legacy.split(",") if v.strip().startswith("v1=")]
    if not offered:
        raise SignatureError("the signature header has no v1 signature")
    if not any(hmac.compare_digest(expected.encode(), o.encode()) for o in offered):
        raise SignatureError("signature does not match the body and secret")


def _timestamp(raw: str | None, name: str, tolerance: float, now: float | None) -> int:
    if raw is None:
        raise SignatureError(f"missing {name} header")
    try:
        stamp = int(raw.strip())
    except ValueError:
        raise SignatureError(f"{name} is not epoch seconds") from None
    now = time.time() if now is None else now
    if abs(now - stamp) > tolerance:
        raise SignatureError(
            f"timestamp is {now - stamp:.0f} s away from now (tolerance {tolerance:g} s)")
    return stamp
