"""The S3 adapter's bucket reads that doctor relies on: whether it exists, its lifecycle."""

from __future__ import annotations

import boto3
import pytest

from imposer.aws.s3 import Storage
from imposer.errors import BackendError


@pytest.fixture
def storage(settings):
    return Storage(settings.region)


class TestBucket:
    def test_a_provisioned_bucket_exists_and_another_does_not(self, storage, settings):
        """HEAD finds the provisioned bucket; a 404 is False, not an error."""
        assert storage.bucket_exists(settings.bucket)
        assert not storage.bucket_exists(f"{settings.bucket}-nothing")

    def test_lifecycle_rules_are_read_or_refused(self, storage, settings):
        """A bucket with no rules raises BackendError naming it; one with rules returns them."""
        with pytest.raises(BackendError, match=f"read the lifecycle of {settings.bucket}"):
            storage.lifecycle_rules(settings.bucket)
        boto3.session.Session().client("s3").put_bucket_lifecycle_configuration(
            Bucket=settings.bucket, LifecycleConfiguration={"Rules": [{
                "ID": "attempts", "Status": "Enabled", "Filter": {"Prefix": "attempts/"},
                "Expiration": {"Days": 2}}]})
        [rule] = storage.lifecycle_rules(settings.bucket)
        assert (rule["ID"], rule["Expiration"]["Days"]) == ("attempts", 2)
