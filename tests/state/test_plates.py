"""Plate promotion: the committed attempt's plate becomes the job's output, once, on real S3."""

from __future__ import annotations

import logging

import pytest

from imposer.aws.s3 import Storage
from imposer.errors import BackendError
from imposer.models import S3Uri
from imposer.state import plates
from tests.fixtures.jobs import request


@pytest.fixture
def storage(settings):
    return Storage(settings.region)


def attempt_of(storage, req, epoch: str, tmp_path) -> str:
    """Upload a plate for *epoch*'s attempt, as a pool child does; return its key."""
    path = tmp_path / f"{epoch}.pdf"
    path.write_bytes(f"%PDF-1.7 plate of {epoch}".encode())
    attempt = req.attempt_uri(epoch)
    storage.upload(path, S3Uri.parse(attempt), epoch=epoch)
    return attempt


def promote(storage, req, attempt: str, epoch: str) -> bool:
    return plates.promote(storage, tenant_id=req.tenant_id, job_id=req.job_id,
                          attempt=attempt, output=req.output, epoch=epoch)


class TestPromote:
    def test_the_attempts_plate_becomes_the_output(self, settings, storage, tmp_path):
        """The plate moves to the output key, and its attempt copy is gone."""
        req = request(bucket=settings.bucket)
        attempt = attempt_of(storage, req, "e1", tmp_path)
        assert promote(storage, req, attempt, "e1") is True
        assert storage.get_bytes(S3Uri.parse(req.output)) == b"%PDF-1.7 plate of e1"
        assert storage.epoch_of(S3Uri.parse(attempt)) is None

    def test_promoting_again_is_no_change(self, settings, storage, tmp_path):
        """A second promoter of the same attempt (a returning message, the webhook sender)
        finds the plate in place and says so."""
        req = request(bucket=settings.bucket)
        attempt = attempt_of(storage, req, "e1", tmp_path)
        assert promote(storage, req, attempt, "e1") and promote(storage, req, attempt, "e1")
        assert storage.epoch_of(S3Uri.parse(req.output)) == "e1"

    def test_another_attempts_plate_is_kept_and_the_conflict_logged(self, settings, storage,
                                                                    tmp_path, caplog):
        """An output holding another attempt's plate is left alone: False, and one
        ``promote_conflict`` error naming the job."""
        req = request(bucket=settings.bucket)
        promote(storage, req, attempt_of(storage, req, "e1", tmp_path), "e1")
        with caplog.at_level(logging.ERROR, logger="imposer.state.plates"):
            assert promote(storage, req, attempt_of(storage, req, "e2", tmp_path), "e2") is False
        assert storage.epoch_of(S3Uri.parse(req.output)) == "e1"
        assert [(r.action, r.job_id) for r in caplog.records] == \
            [("promote_conflict", req.job_id)]

    def test_an_aws_error_is_the_callers_to_handle(self, settings, storage, tmp_path):
        """A promotion S3 refuses (here: no such bucket) raises, so each caller tries again
        its own way."""
        req = request(bucket=f"{settings.bucket}-gone")
        with pytest.raises(BackendError):
            promote(storage, req, req.attempt_uri("e1"), "e1")


class TestRacingPromoters:
    def test_two_promoters_of_one_attempt_write_one_version(self, settings, storage, tmp_path):
        """A duplicate delivery's finish promoting while the settling host promotes (both
        read an empty key first) leaves one plate version at the output key, and both
        say it is there (the chaos run saw two versions)."""
        req = request(bucket=settings.bucket)
        attempt = attempt_of(storage, req, "e1", tmp_path)
        other = Storage(settings.region)
        raced = []

        def the_other_host_first(**_):
            if not raced:
                raced.append(promote(other, req, attempt, "e1"))

        storage.client.meta.events.register("before-call.s3.CopyObject", the_other_host_first)
        assert promote(storage, req, attempt, "e1") is True
        assert raced == [True]
        listing = storage.client.list_object_versions(
            Bucket=settings.bucket, Prefix=S3Uri.parse(req.output).key)
        assert len(listing.get("Versions", [])) == 1 and not listing.get("DeleteMarkers")
        assert storage.epoch_of(S3Uri.parse(req.output)) == "e1"
