"""The S3 adapter: the only AWS the pool children touch."""

from __future__ import annotations

from pathlib import Path

import botocore.exceptions

from imposer.aws import session
from imposer.errors import BackendError, InputPdfError, MissingResource, StorageError
from imposer.models import S3Uri


class Storage:
    """Download inputs and upload plates; errors become job errors."""

    def __init__(self, region: str) -> None:
        self.client = session.client("s3", region)

    def download(self, uri: S3Uri, path: Path) -> int:
        """Fetch *uri* to *path*; a missing object is the tenant's permanent error."""
        try:
            with session.translated(f"download {uri}"):
                try:
                    self.client.download_file(uri.bucket, uri.key, str(path))
                except botocore.exceptions.ClientError as exc:
                    if session.error_code(exc) in ("404", "NoSuchKey", "403"):
                        raise InputPdfError(f"{uri} does not exist or is not readable") from None
                    raise
        except MissingResource as exc:
            raise InputPdfError(str(exc)) from None
        except BackendError as exc:
            raise StorageError(str(exc)) from None
        return path.stat().st_size

    def upload(self, path: Path, uri: S3Uri, content_type: str = "application/pdf") -> int:
        try:
            with session.translated(f"upload {uri}"):
                self.client.upload_file(str(path), uri.bucket, uri.key,
                                        ExtraArgs={"ContentType": content_type})
        except BackendError as exc:
            raise StorageError(str(exc)) from None
        return path.stat().st_size

    def put_bytes(self, data: bytes, uri: S3Uri, content_type: str = "application/octet-stream") -> None:
        with session.translated(f"upload {uri}"):
            self.client.put_object(Bucket=uri.bucket, Key=uri.key, Body=data,
                                   ContentType=content_type)

    def get_bytes(self, uri: S3Uri) -> bytes:
        with session.translated(f"download {uri}"):
            return self.client.get_object(Bucket=uri.bucket, Key=uri.key)["Body"].read()

    def ensure_bucket(self, bucket: str, region: str) -> bool:
        """Create *bucket* if missing; return True if created."""
        with session.translated(f"create bucket {bucket}"):
            try:
                self.client.head_bucket(Bucket=bucket)
                return False
            except botocore.exceptions.ClientError as exc:
                if session.error_code(exc) not in ("404", "NoSuchBucket"):
                    raise
            kwargs = {"Bucket": bucket}
            if region != "us-east-1":
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
            self.client.create_bucket(**kwargs)
        return True
