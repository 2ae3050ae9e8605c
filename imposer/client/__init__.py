"""The tenant side of imposer: admission control, job submission, webhook checks.

It shares only ``imposer.models`` with the service; boto3 is confined to
``imposer.client.aws`` and Redis to ``imposer.client.admission``.
"""

from __future__ import annotations

from imposer.client.admission import Admission, Limits
from imposer.client.errors import (
    AdmissionError,
    AdmissionUnavailable,
    DuplicateToken,
    ImposerClientError,
    InflightCapReached,
    RateLimited,
    SubmitError,
    WebhookVerificationError,
)
from imposer.client.submit import submit
from imposer.client.webhook import verify_webhook

__all__ = [
    "Admission",
    "AdmissionError",
    "AdmissionUnavailable",
    "DuplicateToken",
    "ImposerClientError",
    "InflightCapReached",
    "Limits",
    "RateLimited",
    "SubmitError",
    "WebhookVerificationError",
    "submit",
    "verify_webhook",
]
