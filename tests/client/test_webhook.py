"""imposer.client.webhook: a tenant trusts only fresh events signed with its secret."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from imposer.client import WebhookVerificationError, verify_webhook
from imposer.models.signature import sign

SECRET = "s3cr3t"
NOW = 1_700_000_000
BODY = json.dumps({"job_id": "job-1", "tenant_id": "acme", "status": "succeeded"}).encode()


def signed(body: bytes = BODY, secret: str = SECRET, timestamp: int = NOW) -> dict[str, str]:
    """Sign the way the documented scheme says, independently of either module."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Imposer-Timestamp": str(timestamp), "X-Imposer-Signature": f"v1={digest}"}


class TestVerifyWebhook:
    def test_accepts_signed_body(self):
        """A body signed with the secret and a current timestamp returns its event."""
        event = verify_webhook(signed(), BODY, SECRET, now=NOW + 10)
        assert event == json.loads(BODY)

    def test_matches_service_signer(self):
        """Headers made by the service's sign() verify on the client side."""
        assert verify_webhook(sign(SECRET, BODY, NOW, "msg_1"), BODY, SECRET, now=NOW)["job_id"] == "job-1"

    def test_header_names_any_case(self):
        """Header lookup ignores case, as HTTP does."""
        headers = {k.lower(): v for k, v in signed().items()}
        assert verify_webhook(headers, BODY, SECRET, now=NOW)["status"] == "succeeded"

    def test_header_pairs(self):
        """Headers given as (name, value) pairs are accepted too."""
        assert verify_webhook(list(signed().items()), BODY, SECRET, now=NOW)["job_id"] == "job-1"

    def test_rejects_tampered_body(self):
        """A body changed after signing is refused."""
        tampered = BODY.replace(b"succeeded", b"failed")
        with pytest.raises(WebhookVerificationError, match="does not match"):
            verify_webhook(signed(), tampered, SECRET, now=NOW)

    def test_rejects_wrong_secret(self):
        """A body signed with another secret is refused."""
        with pytest.raises(WebhookVerificationError, match="does not match"):
            verify_webhook(signed(secret="other"), BODY, SECRET, now=NOW)

    def test_rejects_old_timestamp(self):
        """A correctly signed request older than the tolerance is refused as a replay."""
        with pytest.raises(WebhookVerificationError, match="tolerance"):
            verify_webhook(signed(), BODY, SECRET, tolerance=300, now=NOW + 301)

    def test_rejects_future_timestamp(self):
        """A timestamp too far in the future is refused as well."""
        with pytest.raises(WebhookVerificationError, match="tolerance"):
            verify_webhook(signed(timestamp=NOW + 3600), BODY, SECRET, now=NOW)

    def test_rejects_moved_timestamp(self):
        """Changing the timestamp header breaks the signature, so it cannot be refreshed."""
        headers = signed(timestamp=NOW - 1000)
        headers["X-Imposer-Timestamp"] = str(NOW)
        with pytest.raises(WebhookVerificationError, match="does not match"):
            verify_webhook(headers, BODY, SECRET, now=NOW)

    @pytest.mark.parametrize("missing", ["X-Imposer-Timestamp", "X-Imposer-Signature"])
    def test_rejects_missing_header(self, missing):
        """A request without the timestamp or the signature header is refused."""
        headers = signed()
        del headers[missing]
        with pytest.raises(WebhookVerificationError, match="missing"):
            verify_webhook(headers, BODY, SECRET, now=NOW)

    @pytest.mark.parametrize("value", ["", "sha256=abc", "v1"])
    def test_rejects_malformed_signature(self, value):
        """A signature header without a v1= value is refused."""
        headers = {**signed(), "X-Imposer-Signature": value}
        with pytest.raises(WebhookVerificationError):
            verify_webhook(headers, BODY, SECRET, now=NOW)

    def test_rejects_non_numeric_timestamp(self):
        """A timestamp that is not epoch seconds is refused."""
        headers = {**signed(), "X-Imposer-Timestamp": "yesterday"}
        with pytest.raises(WebhookVerificationError, match="epoch"):
            verify_webhook(headers, BODY, SECRET, now=NOW)

    def test_accepts_one_of_several_signatures(self):
        """During a secret rotation any listed v1 signature may match."""
        good = signed()["X-Imposer-Signature"]
        headers = {**signed(), "X-Imposer-Signature": f"v1={'0' * 64}, {good}"}
        assert verify_webhook(headers, BODY, SECRET, now=NOW)["job_id"] == "job-1"

    def test_rejects_signed_non_object(self):
        """A signed body that is not a JSON object is refused rather than returned."""
        body = b"[1, 2]"
        with pytest.raises(WebhookVerificationError, match="object"):
            verify_webhook(signed(body=body), body, SECRET, now=NOW)

    def test_rejects_empty_secret(self):
        """Verifying against an empty secret is refused instead of trivially passing."""
        with pytest.raises(WebhookVerificationError, match="secret"):
            verify_webhook(signed(secret=""), BODY, "", now=NOW)

    def test_exit_code(self):
        """The error carries its own exit code for the command line."""
        assert WebhookVerificationError.exit_code == 14
