"""The job request: what a tenant sends, as the body of one SQS message."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import attrs

from imposer.errors import InvalidMessage

TENANT_PREFIX = "tenants/{tenant}/"

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def valid_id(value: Any) -> bool:
    """Say whether *value* is usable as a tenant or job id (and inside an S3 key)."""
    return isinstance(value, str) and bool(_ID_RE.match(value))


def new_job_id() -> str:
    return uuid.uuid4().hex


@attrs.frozen(kw_only=True)
class S3Uri:
    """An ``s3://bucket/key`` address."""

    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: Any) -> "S3Uri":
        if not isinstance(uri, str) or not uri.startswith("s3://"):
            raise InvalidMessage(f"not an s3:// URI: {uri!r}")
        bucket, _, key = uri[5:].partition("/")
        if not bucket or not key or ".." in key.split("/"):
            raise InvalidMessage(f"malformed S3 URI: {uri!r}")
        return cls(bucket=bucket, key=key)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@attrs.frozen(kw_only=True)
class JobRequest:
    """What a tenant asks for: the body of one SQS message."""

    #: Unique id of the job; the key of its record and lease.
    job_id: str
    #: Canonical tenant id; also the message's MessageGroupId.
    tenant_id: str
    #: Tenant-chosen idempotency token (defaults to the job id).
    token: str
    #: s3:// URI of the artwork PDF.
    input: str
    #: s3:// URI of the layout spec, or the spec itself (a dict).
    layout: Any
    #: s3:// URI the plate file is written to.
    output: str
    #: Optional URL to POST the completion event to.
    webhook: str | None = None
    #: Wall-clock epoch seconds of the first submission (survives re-publishing).
    submitted_at: float | None = None

    VERSION = 1

    @classmethod
    def from_body(cls, body: str) -> "JobRequest":
        """Parse and validate a message body; raise InvalidMessage saying why."""
        try:
            data = json.loads(body)
        except (TypeError, ValueError) as exc:
            raise InvalidMessage(f"body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidMessage("body is not a JSON object")
        version = data.get("version", cls.VERSION)
        if version != cls.VERSION:
            raise InvalidMessage(f"unsupported message version {version!r}")
        for field in ("job_id", "tenant_id"):
            if not valid_id(data.get(field)):
                raise InvalidMessage(f"{field} missing or invalid: {data.get(field)!r}")
        for field in ("input", "output"):
            if not isinstance(data.get(field), str):
                raise InvalidMessage(f"{field} missing: want an s3:// URI")
        layout = data.get("layout")
        if not isinstance(layout, (str, dict)):
            raise InvalidMessage("layout missing: want an s3:// URI or an inline spec")
        webhook = data.get("webhook")
        if webhook is not None and not isinstance(webhook, str):
            raise InvalidMessage("webhook must be a URL string")
        submitted = data.get("submitted_at")
        if submitted is not None and not isinstance(submitted, (int, float)):
            raise InvalidMessage("submitted_at must be epoch seconds")
        token = data.get("token") or data["job_id"]
        if not isinstance(token, str) or len(token) > 256:
            raise InvalidMessage("token must be a string of at most 256 characters")
        return cls(
            job_id=data["job_id"],
            tenant_id=data["tenant_id"],
            token=token,
            input=data["input"],
            layout=layout,
            output=data["output"],
            webhook=webhook,
            submitted_at=submitted,
        )

    def to_body(self) -> str:
        data = attrs.asdict(self)
        data["version"] = self.VERSION
        return json.dumps({k: v for k, v in data.items() if v is not None}, sort_keys=True)

    def check_prefix(self, bucket: str) -> None:
        """Refuse any S3 address outside the tenant's prefix of the artwork bucket."""
        prefix = TENANT_PREFIX.format(tenant=self.tenant_id)
        uris = [("input", self.input), ("output", self.output)]
        if isinstance(self.layout, str):
            uris.append(("layout", self.layout))
        for field, raw in uris:
            uri = S3Uri.parse(raw)
            if uri.bucket != bucket:
                raise InvalidMessage(f"{field} is in bucket {uri.bucket!r}, not {bucket!r}")
            if not uri.key.startswith(prefix):
                raise InvalidMessage(f"{field} key {uri.key!r} is outside {prefix!r}")
