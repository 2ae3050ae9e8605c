"""The job request: what a tenant sends, as the body of one SQS message.

One validation, shared by the client (before it publishes) and the worker
(on every receipt): ids match in full, numbers are finite and in range, the
body is bounded in size and nesting depth and is parsed with those limits.
Every violation is an ``InvalidMessage`` saying why, never another exception.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from typing import Any

import attrs

from imposer.errors import InvalidMessage
from imposer.models.urgency import DEFAULT_PRIORITY, format_due, parse_due, parse_priority

TENANT_PREFIX = "tenants/{tenant}/"

#: Ids (tenants, jobs): a letter or digit, then letters, digits, ``.``, ``_``, ``-``.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: Largest message body imposer reads (SQS itself allows 256 KiB).
MAX_BODY_BYTES = 256 * 1024
#: Deepest JSON nesting a body may have; a layout spec needs about 4.
MAX_DEPTH = 32
#: Longest idempotency token, webhook URL and S3 URI.
MAX_TOKEN, MAX_URL, MAX_URI = 256, 2048, 1024
#: Submission times outside [2001-09-09, 2100-01-01) are refused as nonsense.
EARLIEST, LATEST = 1_000_000_000.0, 4_102_444_800.0


def valid_id(value: Any) -> bool:
    """Say whether *value* is usable as a tenant or job id (and inside an S3 key)."""
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def new_job_id() -> str:
    return uuid.uuid4().hex


def job_key(tenant_id: str, job_id: str) -> str:
    """Return a job's identity as one string: jobs belong to tenants, ids do not cross."""
    return f"{tenant_id}/{job_id}"


def depth_of(text: str) -> int:
    """Return the deepest bracket nesting of JSON *text*, without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str | bytes, what: str = "body", max_bytes: int = MAX_BODY_BYTES,
               max_depth: int = MAX_DEPTH, constants: bool = False) -> Any:
    """Parse JSON within size and depth limits, refusing NaN and Infinity (unless
    *constants*: only to read who sent a body that is refused anyway)."""
    if isinstance(text, bytes):
        if len(text) > max_bytes:
            raise InvalidMessage(f"{what} is {len(text)} bytes; the limit is {max_bytes}")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidMessage(f"{what} is not UTF-8") from None
    if not isinstance(text, str):
        raise InvalidMessage(f"{what} is not text")
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidMessage(f"{what} is over {max_bytes} bytes")
    if depth_of(text) > max_depth:
        raise InvalidMessage(f"{what} nests deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=None if constants else _no_constants)
    except (ValueError, RecursionError) as exc:
        raise InvalidMessage(f"{what} is not JSON: {exc}") from None


def _text(data: dict, field: str, limit: int, required: bool = True) -> str | None:
    value = data.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidMessage(f"{field} missing: want a string")
    if len(value) > limit:
        raise InvalidMessage(f"{field} is longer than {limit} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidMessage(f"{field} contains control characters")
    return value


@attrs.frozen(kw_only=True)
class S3Uri:
    """An ``s3://bucket/key`` address."""

    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: Any) -> "S3Uri":
        if not isinstance(uri, str) or not uri.startswith("s3://"):
            raise InvalidMessage(f"not an s3:// URI: {str(uri)[:200]!r}")
        bucket, _, key = uri[5:].partition("/")
        parts = key.split("/")
        if not bucket or not key or ".." in parts or "." in parts or "" in parts[:-1] \
                or any(ord(c) < 32 or ord(c) == 127 or c == "\\" for c in uri):
            raise InvalidMessage(f"malformed S3 URI: {uri[:200]!r}")
        return cls(bucket=bucket, key=key)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@attrs.frozen(kw_only=True)
class JobRequest:
    """What a tenant asks for: the body of one SQS message."""

    #: The tenant's id of the job; with the tenant it is the job's identity.
    job_id: str
    #: Canonical tenant id; also the message's MessageGroupId.
    tenant_id: str
    #: Tenant-chosen idempotency token (defaults to the job id).
    token: str
    #: s3:// URI of the artwork PDF.
    input: str
    #: ``{"preset": NAME}``, an inline spec (an object), or the s3:// URI of a spec file.
    layout: Any
    #: s3:// URI the plate file is written to.
    output: str
    #: Optional URL to POST the completion event to.
    webhook: str | None = None
    #: Wall-clock epoch seconds of the first submission (survives re-publishing).
    submitted_at: float | None = None
    #: 0 (most urgent) to 9; orders this tenant's own waiting jobs only.
    priority: int = DEFAULT_PRIORITY
    #: Optional wall-clock epoch seconds the tenant wants it by (``due`` in ISO-8601 on the wire).
    due: float | None = None

    VERSION = 1

    @property
    def key(self) -> str:
        """The job's identity: (tenant, job id) as one string."""
        return job_key(self.tenant_id, self.job_id)

    def attempt_uri(self, epoch: str) -> str:
        """Where one attempt's plate goes before it is promoted to ``output``.

        Under ``attempts/`` of the output's bucket, outside every tenant's prefix:
        attempts are imposer's, and a lifecycle rule on the prefix expires
        leftovers of attempts that never committed.
        """
        bucket = S3Uri.parse(self.output).bucket
        return f"s3://{bucket}/attempts/{self.tenant_id}/{self.job_id}/{epoch}.pdf"

    @classmethod
    def from_body(cls, body: str | bytes) -> "JobRequest":
        """Parse and validate a message body; raise InvalidMessage saying why."""
        data = parse_json(body)
        if not isinstance(data, dict):
            raise InvalidMessage("body is not a JSON object")
        version = data.get("version", cls.VERSION)
        if version != cls.VERSION or isinstance(version, bool):
            raise InvalidMessage(f"unsupported message version {str(version)[:20]!r}")
        for field in ("job_id", "tenant_id"):
            if not valid_id(data.get(field)):
                raise InvalidMessage(f"{field} missing or invalid: {str(data.get(field))[:140]!r}"
                                     " (want 1-128 of A-Z a-z 0-9 . _ -, starting with a "
                                     "letter or digit)")
        for field in ("input", "output"):
            if not isinstance(data.get(field), str):
                raise InvalidMessage(f"{field} missing: want an s3:// URI")
            _text(data, field, MAX_URI)
        layout = cls._layout(data.get("layout"))
        webhook = _text(data, "webhook", MAX_URL, required=False)
        submitted = data.get("submitted_at")
        if submitted is not None:
            if isinstance(submitted, bool) or not isinstance(submitted, (int, float)) \
                    or not math.isfinite(submitted) or not EARLIEST <= submitted < LATEST:
                raise InvalidMessage(f"submitted_at must be epoch seconds between {EARLIEST:.0f}"
                                     f" and {LATEST:.0f}, got {str(submitted)[:40]}")
            submitted = float(submitted)
        priority, due = parse_priority(data.get("priority")), parse_due(data.get("due"))
        token = data.get("token") or data["job_id"]
        if not isinstance(token, str) or len(token) > MAX_TOKEN \
                or any(ord(c) < 32 or ord(c) == 127 for c in token):
            raise InvalidMessage(f"token must be a string of at most {MAX_TOKEN} characters "
                                 "without control characters")
        return cls(job_id=data["job_id"], tenant_id=data["tenant_id"], token=token,
                   input=data["input"], layout=layout, output=data["output"], webhook=webhook,
                   submitted_at=submitted, priority=priority, due=due)

    @staticmethod
    def salvage(body: str | bytes) -> dict[str, str | None] | None:
        """Who to tell that *body* is refused: its ``job_id``, ``tenant_id``, ``webhook`` and
        ``token``, or None when the ids cannot be read.

        Read however else the body is wrong, non-standard numbers (NaN, Infinity:
        what Python's ``json.dumps`` writes) included, so the tenant hears of it.
        """
        try:
            data = parse_json(body, constants=True)
        except InvalidMessage:
            return None
        if not isinstance(data, dict) or not valid_id(data.get("job_id")) \
                or not valid_id(data.get("tenant_id")):
            return None
        found: dict[str, str | None] = {"job_id": data["job_id"],
                                        "tenant_id": data["tenant_id"]}
        for field, limit in (("webhook", MAX_URL), ("token", MAX_TOKEN)):
            try:
                found[field] = _text(data, field, limit, required=False)
            except InvalidMessage:
                found[field] = None
        return found

    @staticmethod
    def _layout(layout: Any) -> Any:
        if isinstance(layout, str):
            if not layout.startswith("s3://"):
                raise InvalidMessage("layout must be {\"preset\": NAME}, an inline spec or an "
                                     f"s3:// URI; got the string {layout[:200]!r}")
            return layout
        if not isinstance(layout, dict):
            raise InvalidMessage("layout missing: want {\"preset\": NAME}, an inline spec or an "
                                 "s3:// URI")
        if "preset" in layout:
            if set(layout) != {"preset"} or not valid_id(layout["preset"]):
                raise InvalidMessage("a preset layout is {\"preset\": NAME} with a plain name, "
                                     f"got {json.dumps(layout)[:200]}")
        return layout

    def to_body(self) -> str:
        data = attrs.asdict(self)
        data["version"] = self.VERSION
        if self.due is not None:
            data["due"] = format_due(self.due)
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
        if S3Uri.parse(self.input).key == S3Uri.parse(self.output).key:
            raise InvalidMessage("output must not overwrite the input")
