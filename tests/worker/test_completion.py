"""The Completer's settlement steps on real jobs: the release, the plate, the message.

Each job is real up to its child's report: its artwork uploaded and its
message sent by the client library, received from the queue, its lease taken
in DynamoDB and, for a success, its plate uploaded under the attempt's key as
a pool child would; only the report itself is written here.
"""

from __future__ import annotations

import logging

import boto3
import pikepdf
import pytest
from botocore.exceptions import ClientError

from imposer.aws.s3 import EPOCH_META
from imposer.models import Fate, JobStatus, S3Uri
from imposer.worker.settle.completion import Settled
from imposer.worker.threads import sweep as sweeping
from tests.fixtures.jobs import record_of
from tests.fixtures.settling import completer_for, reported


@pytest.fixture
def completer(settings, backends, clock):
    return completer_for(settings, backends, clock)


def head(uri: str) -> dict | None:
    """The S3 object's metadata, or None if there is none."""
    where = S3Uri.parse(uri)
    try:
        return boto3.client("s3").head_object(Bucket=where.bucket, Key=where.key)["Metadata"]
    except ClientError:
        return None


def left_in_queue(backends) -> int:
    depth = backends.queue.depth()
    return depth["visible"] + depth["in_flight"] + depth["delayed"]


class TestCompleter:
    def test_a_success_is_released_its_plate_promoted_and_its_message_deleted(
            self, completer, settings, backends, clock, tmp_path, caplog):
        """A success: one release commits the record, the attempt's plate becomes the output
        (a readable PDF stamped with the attempt's epoch), the message is deleted, and the
        job leaves the table with its ``job_finished`` line."""
        job = reported(completer, settings, backends, clock, tmp_path, Fate.SUCCEEDED,
                       plate=True)
        with caplog.at_level(logging.INFO, logger="imposer"):
            settlement = completer.settle(job)
        assert (settlement.state, settlement.handed) == (Settled.DONE, None)
        record = record_of(backends, job.request.job_id)
        assert (record.status, record.output_epoch) == (JobStatus.SUCCEEDED, job.epoch)
        # what the release charged (fair share counts it at once): launch to its end
        assert settlement.charged == (record.finished_at - job.lease.acquired_at,
                                      record.finished_at)
        assert head(job.request.output)[EPOCH_META] == job.epoch
        plate = tmp_path / "out.pdf"
        completer.storage.download(S3Uri.parse(job.request.output), plate)
        with pikepdf.open(plate) as pdf:
            assert len(pdf.pages) == 2
        assert left_in_queue(backends) == 0
        assert backends.leases.counters()["acme"].inflight == 0
        assert not len(completer.table)
        finished = [r for r in caplog.records if getattr(r, "action", None) == "job_finished"]
        assert [r.status for r in finished] == ["succeeded"]

    def test_a_failure_is_recorded_and_its_message_deleted_with_no_plate(
            self, completer, settings, backends, clock, tmp_path):
        """A permanent failure is final: its record says why, its message is deleted and no
        output appears."""
        job = reported(completer, settings, backends, clock, tmp_path, Fate.FAILED)
        assert completer.settle(job).state is Settled.DONE
        record = record_of(backends, job.request.job_id)
        assert (record.status, record.error) == (JobStatus.FAILED, "the tool said no")
        assert head(job.request.output) is None
        assert left_in_queue(backends) == 0

    def test_a_retry_counts_a_failure_and_keeps_its_message(self, completer, settings,
                                                           backends, clock, tmp_path):
        """A transient failure is counted and its message stays in the queue to run again."""
        job = reported(completer, settings, backends, clock, tmp_path, Fate.RETRY)
        assert completer.settle(job).state is Settled.DONE
        record = record_of(backends, job.request.job_id)
        assert (record.status, record.failures) == (JobStatus.RETRYING, 1)
        assert left_in_queue(backends) == 1
        assert backends.leases.counters()["acme"].inflight == 0

    def test_a_release_refused_on_its_epoch_voids_the_attempt(self, completer, settings,
                                                             backends, clock, tmp_path,
                                                             caplog):
        """The lease was reclaimed before the release: the job is given up (it runs again),
        its attempt's plate is deleted and never promoted, and its message is kept."""
        job = reported(completer, settings, backends, clock, tmp_path, Fate.SUCCEEDED,
                       plate=True)
        attempt = job.request.attempt_uri(job.epoch)
        assert head(attempt) is not None
        sweeping.reclaim_host(backends.leases, backends.metrics, settings.host_id)
        with caplog.at_level(logging.ERROR, logger="imposer"):
            assert completer.settle(job).state is Settled.LOST
        assert head(attempt) is None and head(job.request.output) is None
        assert left_in_queue(backends) == 1
        assert record_of(backends, job.request.job_id).status is not JobStatus.SUCCEEDED
        assert not len(completer.table)
        assert "lease_lost" in [getattr(r, "action", None) for r in caplog.records]
