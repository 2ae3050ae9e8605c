"""The client's only door to AWS: S3 uploads and SQS sends, with errors in our words.

Every job message carries ``MessageGroupId = tenant id``: it is what lets an
SQS fair queue tell a noisy tenant from a quiet one, and it costs nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import boto3
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import BotoCoreError, ClientError

from imposer.client.errors import SubmitError

logger = logging.getLogger(__name__)

_MISSING_QUEUE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
_MISSING_BUCKET = ("NoSuchBucket",)


def _reason(exc: Exception) -> str:
    """Say what went wrong in one line, with AWS's error code when there is one."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '') or exc}"
    return str(exc) or type(exc).__name__


class Aws:
    """S3 and SQS clients of one session, with the queue URLs they have looked up."""

    def __init__(self, *, region: str | None = None, session: Any = None) -> None:
        try:
            session = session or boto3.session.Session(region_name=region)
            self.s3 = session.client("s3", region_name=region)
            self.sqs = session.client("sqs", region_name=region)
        except BotoCoreError as exc:
            raise SubmitError(f"cannot set up AWS clients: {_reason(exc)}") from exc
        self._queue_urls: dict[str, str] = {}

    def upload_file(self, path: str | Path, bucket: str, key: str,
                    content_type: str = "application/pdf") -> str:
        """Upload a local file (multipart when large) and return its s3:// URI."""
        try:
            self.s3.upload_file(str(path), bucket, key, ExtraArgs={"ContentType": content_type})
        except (ClientError, BotoCoreError, S3UploadFailedError) as exc:
            if any(code in str(exc) for code in _MISSING_BUCKET):
                raise SubmitError(f"bucket {bucket!r} does not exist") from exc
            raise SubmitError(
                f"cannot upload {path} to s3://{bucket}/{key}: {_reason(exc)}") from exc
        return f"s3://{bucket}/{key}"

    def upload_bytes(self, data: bytes, bucket: str, key: str,
                     content_type: str = "application/json") -> str:
        """Store a small object and return its s3:// URI."""
        try:
            self.s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
        except (ClientError, BotoCoreError) as exc:
            raise SubmitError(f"cannot upload s3://{bucket}/{key}: {_reason(exc)}") from exc
        return f"s3://{bucket}/{key}"

    def queue_url(self, queue: str) -> str:
        """Look up (once) the URL of the queue called *queue*."""
        if queue not in self._queue_urls:
            try:
                url = self.sqs.get_queue_url(QueueName=queue)["QueueUrl"]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in _MISSING_QUEUE:
                    raise SubmitError(f"queue {queue!r} does not exist") from exc
                raise SubmitError(f"cannot find queue {queue!r}: {_reason(exc)}") from exc
            except BotoCoreError as exc:
                raise SubmitError(f"cannot reach SQS for queue {queue!r}: {_reason(exc)}") from exc
            self._queue_urls[queue] = url
        return self._queue_urls[queue]

    def send(self, queue: str, body: str, *, group_id: str) -> str:
        """Publish one job message in the tenant's message group; return its id."""
        if not group_id:
            raise ValueError("a job message needs a MessageGroupId (the tenant id)")
        url = self.queue_url(queue)
        try:
            reply = self.sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group_id)
        except (ClientError, BotoCoreError) as exc:
            self._queue_urls.pop(queue, None)
            raise SubmitError(f"cannot publish to queue {queue!r}: {_reason(exc)}") from exc
        logger.debug("sent message %s to %s", reply["MessageId"], queue,
                     extra={"action": "sent", "tenant_id": group_id, "job_id": None})
        return reply["MessageId"]
