"""One job inside a pool child, against the local AWS stack: what a failing S3 costs it."""

from __future__ import annotations

import threading

import boto3

from imposer.aws.s3 import EPOCH_META
from imposer.child.task import TaskRunner
from imposer.client import submit
from imposer.models import Fate, S3Uri, TaskSpec
from tests.fixtures.faultproxy import FaultProxy
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import layout, wait_for


class TestUpload:
    def test_an_upload_that_meets_s3_errors_is_tried_again(self, settings, tmp_path,
                                                           monkeypatch, caplog, aws_endpoint):
        """S3 failing the plate's upload for longer than botocore retries costs no attempt:
        the plate on disk is uploaded again once S3 answers."""
        req = submit("acme", numbered_pdf(tmp_path / "art.pdf", 2), layout(),
                     bucket=settings.bucket, queue=settings.queue_name)
        proxy = FaultProxy(aws_endpoint, "child").start()
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        proxy.inject("error", 600, service="s3", operation="PutObject")
        spec = TaskSpec(request=req, timeout=60, upload_to=req.attempt_uri("e1"), epoch="e1",
                        workdir=str(tmp_path / "work"), owner="child-test/boot/0")
        got = []
        runner = threading.Thread(
            target=lambda: got.append(TaskRunner(settings.evolve(engine="open")).run(spec)))
        runner.start()
        try:
            wait_for(lambda: [r for r in caplog.records
                              if getattr(r, "action", None) == "upload_retry"], 120,
                     "the upload to fail once")
        finally:
            proxy.clear()
            runner.join(120)
            proxy.stop()
        (outcome,) = got
        assert outcome.fate == Fate.SUCCEEDED, outcome
        attempt = S3Uri.parse(spec.upload_to)
        s3 = boto3.client("s3", endpoint_url=aws_endpoint)
        head = s3.head_object(Bucket=attempt.bucket, Key=attempt.key)
        assert head["Metadata"][EPOCH_META] == "e1"
