"""The S3 adapter: the only AWS a pool child touches, and the parent's plate promotion.

A child uploads its plate to an attempt key of its own; the parent copies it
to the job's output key only after the attempt's fenced release committed
(``promote``). A reclaimed (zombie) attempt never gets that far, so at most
one attempt's output ever becomes visible at the output key.
"""

from __future__ import annotations

import json
from pathlib import Path

import botocore.exceptions
from boto3.exceptions import S3UploadFailedError

from imposer.aws import session
from imposer.errors import BackendError, InputPdfError, MissingResource, StorageError
from imposer.models import S3Uri

#: Object metadata naming the attempt (fencing epoch) a plate came from.
EPOCH_META = "imposer-epoch"


class Storage:
    """Download inputs and upload plates; errors become job errors."""

    def __init__(self, region: str) -> None:
        self.client = session.client("s3", region)

    def download(self, uri: S3Uri, path: Path, max_bytes: int | None = None) -> int:
        """Fetch *uri* to *path*; a missing or oversized object is the tenant's error."""
        try:
            with session.translated(f"download {uri}"):
                try:
                    if max_bytes is not None:
                        size = self.client.head_object(Bucket=uri.bucket,
                                                       Key=uri.key)["ContentLength"]
                        if size > max_bytes:
                            raise InputPdfError(f"{uri} is {size} bytes; the limit is "
                                                f"{max_bytes}")
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

    def upload(self, path: Path, uri: S3Uri, content_type: str = "application/pdf",
               epoch: str | None = None) -> int:
        """Upload *path* to *uri*; any failure is a StorageError (transient: retried)."""
        extra = {"ContentType": content_type}
        if epoch:
            extra["Metadata"] = {EPOCH_META: epoch}
        try:
            with session.translated(f"upload {uri}"):
                self.client.upload_file(str(path), uri.bucket, uri.key, ExtraArgs=extra)
        except S3UploadFailedError as exc:
            raise StorageError(f"upload {uri} failed: {exc}") from None
        except BackendError as exc:
            raise StorageError(str(exc)) from None
        return path.stat().st_size

    def epoch_of(self, uri: S3Uri) -> str | None:
        """Return the attempt a stored plate came from; "" for a foreign object; None if absent."""
        with session.translated(f"read {uri}"):
            try:
                head = self.client.head_object(Bucket=uri.bucket, Key=uri.key)
            except botocore.exceptions.ClientError as exc:
                # Without s3:ListBucket (the worker has none) S3 says 403 for a missing key.
                # The worker may read every key it heads, so 403 means absent here; and the
                # copy that follows an absent answer is conditional on the key being empty.
                if session.error_code(exc) in ("404", "NoSuchKey", "NotFound", "403"):
                    return None
                raise
        return head.get("Metadata", {}).get(EPOCH_META, "")

    def promote(self, attempt: S3Uri, output: S3Uri, epoch: str) -> bool:
        """Make the committed attempt's plate the job's output; True if it is (now) there.

        Idempotent: a plate already promoted from this epoch is left alone. The
        copy is conditional on the key being empty (S3's If-None-Match), so of
        two promoters of one attempt (its settlement, a duplicate delivery's
        finish, the webhook sender) only one writes: the key gets one version.
        False when another attempt's plate is already there (which fencing
        should make impossible).
        """
        for _ in range(3):  # 409: a conditional write to the key was in flight; S3 says retry
            there = self.epoch_of(output)
            if there == epoch:
                self.delete(attempt)
                return True
            if there:
                return False
            kwargs = {"Bucket": output.bucket, "Key": output.key, "MetadataDirective": "COPY",
                      "CopySource": {"Bucket": attempt.bucket, "Key": attempt.key}}
            if there is None:
                kwargs["IfNoneMatch"] = "*"
            with session.translated(f"promote {attempt} to {output}"):
                try:
                    self.client.copy_object(**kwargs)
                except botocore.exceptions.ClientError as exc:
                    code = session.error_code(exc)
                    if code == "ConditionalRequestConflict":
                        continue
                    if code != "PreconditionFailed":
                        raise
                    return self.epoch_of(output) == epoch
            self.delete(attempt)
            return True
        raise BackendError(f"promote {attempt} to {output}: the key stayed in conflict")

    def delete(self, uri: S3Uri) -> None:
        with session.translated(f"delete {uri}"):
            self.client.delete_object(Bucket=uri.bucket, Key=uri.key)

    def put_bytes(self, data: bytes, uri: S3Uri,
                  content_type: str = "application/octet-stream") -> None:
        with session.translated(f"upload {uri}"):
            self.client.put_object(Bucket=uri.bucket, Key=uri.key, Body=data,
                                   ContentType=content_type)

    def get_bytes(self, uri: S3Uri) -> bytes:
        with session.translated(f"download {uri}"):
            return self.client.get_object(Bucket=uri.bucket, Key=uri.key)["Body"].read()

    def lifecycle_rules(self, bucket: str) -> list[dict]:
        """The bucket's lifecycle rules; a bucket that has none raises BackendError."""
        with session.translated(f"read the lifecycle of {bucket}"):
            return self.client.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]

    def ensure_bucket(self, bucket: str, region: str) -> bool:
        """Create *bucket* if missing; return True if created."""
        with session.translated(f"create bucket {bucket}"):
            try:  # not HeadBucket: an operator of a stack may read settings, not list keys
                self.client.get_bucket_versioning(Bucket=bucket)
                return False
            except botocore.exceptions.ClientError as exc:
                if session.error_code(exc) not in ("404", "NoSuchBucket"):
                    raise
            kwargs = {"Bucket": bucket}
            if region != "us-east-1":
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
            self.client.create_bucket(**kwargs)
        return True

    def configure_bucket(self, bucket: str, settings: dict) -> None:
        """Give a bucket init just made the settings ``bucket_settings`` reads back."""
        with session.translated(f"configure bucket {bucket}"):
            self.client.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={
                "Rules": [{"ApplyServerSideEncryptionByDefault": {
                    "SSEAlgorithm": settings["Encryption"]}}]})
            self.client.put_public_access_block(
                Bucket=bucket, PublicAccessBlockConfiguration=settings["PublicAccessBlock"])
            self.client.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={
                "Rules": [{"ObjectOwnership": settings["Ownership"]}]})
            self.client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={
                "Status": settings["Versioning"]})
            self.client.put_bucket_lifecycle_configuration(
                Bucket=bucket, LifecycleConfiguration={"Rules": settings["Lifecycle"]})
            self.client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(
                {"Version": "2012-10-17", "Statement": settings["Policy"]}))

    def bucket_settings(self, bucket: str) -> dict:
        """The bucket's encryption, public access block, ownership, versioning, lifecycle
        rules and policy statements, None (or []) for each one it has not."""
        c = self.client

        def read(what: str, call, missing: str, pick):
            with session.translated(f"read the {what} of {bucket}"):
                try:
                    return pick(call(Bucket=bucket))
                except botocore.exceptions.ClientError as exc:
                    if session.error_code(exc) != missing:
                        raise
                    return None

        return {
            "Encryption": read("encryption", c.get_bucket_encryption,
                               "ServerSideEncryptionConfigurationNotFoundError",
                               lambda r: r["ServerSideEncryptionConfiguration"]["Rules"][0][
                                   "ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"]),
            "PublicAccessBlock": read("public access block", c.get_public_access_block,
                                      "NoSuchPublicAccessBlockConfiguration",
                                      lambda r: r["PublicAccessBlockConfiguration"]),
            "Ownership": read("ownership controls", c.get_bucket_ownership_controls,
                              "OwnershipControlsNotFoundError",
                              lambda r: r["OwnershipControls"]["Rules"][0]["ObjectOwnership"]),
            "Versioning": read("versioning", c.get_bucket_versioning, "",
                               lambda r: r.get("Status")),
            "Lifecycle": sorted((_rule(r) for r in read(
                "lifecycle", c.get_bucket_lifecycle_configuration,
                "NoSuchLifecycleConfiguration", lambda r: r["Rules"]) or []),
                key=lambda r: r["ID"]),
            "Policy": read("policy", c.get_bucket_policy, "NoSuchBucketPolicy",
                           lambda r: json.loads(r["Policy"])["Statement"]) or [],
        }


def _rule(rule: dict) -> dict:
    """A lifecycle rule with its prefix in ``Filter``, where S3 reports it either way
    (a rule made with the older top-level ``Prefix``, as CloudFormation may, keeps it)."""
    out = dict(rule)
    prefix = out.pop("Prefix", None)
    if not out.get("Filter"):
        out["Filter"] = {"Prefix": prefix or ""}
    return out
