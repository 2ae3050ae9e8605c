"""The S3 adapter's bucket reads that init and doctor rely on: its settings, its lifecycle."""

from __future__ import annotations

import boto3
import pytest

from imposer.aws.s3 import Storage
from imposer.errors import BackendError, MissingResource
from imposer.state.provision import bucket_settings


@pytest.fixture
def storage(settings):
    return Storage(settings.region)


class TestBucket:
    def test_a_provisioned_buckets_settings_are_read_and_a_missing_one_is_named(
            self, storage, settings):
        """init's bucket reads back the settings it was given; a missing bucket is
        MissingResource, not None for each setting."""
        assert storage.bucket_settings(settings.bucket) == bucket_settings(settings)
        with pytest.raises(MissingResource, match=f"{settings.bucket}-nothing"):
            storage.bucket_settings(f"{settings.bucket}-nothing")

    def test_lifecycle_rules_are_read_or_refused(self, storage, settings):
        """A bucket with no rules raises BackendError naming it; one with rules returns them."""
        boto3.session.Session().client("s3").delete_bucket_lifecycle(Bucket=settings.bucket)
        with pytest.raises(BackendError, match=f"read the lifecycle of {settings.bucket}"):
            storage.lifecycle_rules(settings.bucket)
        boto3.session.Session().client("s3").put_bucket_lifecycle_configuration(
            Bucket=settings.bucket, LifecycleConfiguration={"Rules": [{
                "ID": "attempts", "Status": "Enabled", "Filter": {"Prefix": "attempts/"},
                "Expiration": {"Days": 2}}]})
        [rule] = storage.lifecycle_rules(settings.bucket)
        assert (rule["ID"], rule["Expiration"]["Days"]) == ("attempts", 2)
