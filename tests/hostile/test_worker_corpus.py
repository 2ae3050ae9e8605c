"""Hostile input against a real worker: messages, PDFs, layouts, webhook URLs, other tenants.

One `imposer run` (open engine) takes the whole corpus, with good jobs among
it. Each case then checks its own clear reason, and the run as a whole checks
that the worker kept serving, that no lease or counter leaked and that no
process of the worker opened a file a message named (an audit hook in every
process of the run records each open).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import boto3
import pikepdf
import pytest
from pikepdf import Name

from imposer.dev.samples import A5, numbered_pdf
from imposer.models import TenantConfig
from imposer.state.provision import provision
from imposer.worker.wiring import connect
from tests.engine.test_hostile_inputs import bomb, pdf_with
from tests.fixtures.workers import Worker

pytestmark = pytest.mark.slow

AUDIT = Path(__file__).parent / "audit"
SECRET_FILE = "planted-secret-layout.json"
#: cases: (id, how it is sent, what must come of it)
CASES: list[tuple[str, dict, tuple]] = []


def case(name: str, outcome: tuple, **send) -> None:
    CASES.append((name, send, outcome))


def body(**fields):
    """A message body: a valid job of acme unless *fields* say otherwise (``...`` drops one)."""
    unique = uuid.uuid4().hex
    data = {"version": 1, "job_id": unique, "tenant_id": "acme",
            "input": "s3://{B}/tenants/acme/in/good.pdf",
            "output": f"s3://{{B}}/tenants/acme/out/{unique}.pdf",
            "layout": {"preset": "a5-4up-sra3"}}
    data.update(fields)
    return {k: v for k, v in data.items() if v is not ...}


# -- invalid messages: dead-lettered once, with the reason ------------------------------------
DLQ = "dlq"
case("not-json", (DLQ, "not JSON"), raw="not json at all")
case("json-list", (DLQ, "not a JSON object"), raw="[1, 2, 3]")
case("deep-nesting", (DLQ, "nests deeper than 32"), raw="[" * 60000 + "]" * 60000)
case("nan-submitted", (DLQ, "NaN is not a number"), raw='{"version": 1, "submitted_at": NaN}')
case("infinity-submitted", (DLQ, "Infinity is not a number"),
     raw='{"version": 1, "job_id": "j", "tenant_id": "acme", "submitted_at": Infinity}')
case("huge-submitted", (DLQ, "submitted_at must be epoch seconds"), json=body(submitted_at=1e308))
case("negative-submitted", (DLQ, "submitted_at must be epoch seconds"), json=body(submitted_at=-5))
case("text-submitted", (DLQ, "submitted_at must be epoch seconds"),
     json=body(submitted_at="yesterday"))
# ...and a job whose urgency is unreadable keeps a failed record saying why, for its tenant.
RECORDED = "recorded"
case("priority-out-of-range", (DLQ, "priority must be a whole number from 0", RECORDED),
     json=body(priority=99))
case("priority-text", (DLQ, "priority must be a whole number from 0", RECORDED),
     json=body(priority="1"))
case("priority-huge", (DLQ, "priority must be a whole number from 0", RECORDED),
     json=body(priority=1e308))
case("due-unparseable", (DLQ, "due is not an ISO-8601 time", RECORDED), json=body(due="asap"))
case("due-naive", (DLQ, "due has no timezone", RECORDED), json=body(due="2027-01-01T09:00:00"))
case("due-far-future", (DLQ, "at most a year ahead", RECORDED),
     json=body(due="9999-01-01T00:00:00Z"))
case("due-before-2000", (DLQ, "due must be after 2000-01-01", RECORDED),
     json=body(due="1970-01-01T00:00:00Z"))
case("due-number", (DLQ, "due must be an ISO-8601 time", RECORDED), json=body(due=1e308))
case("version-2", (DLQ, "unsupported message version"), json=body(version=2))
case("version-bool", (DLQ, "unsupported message version"), json=body(version=True))
case("job-id-missing", (DLQ, "job_id missing or invalid"), json=body(job_id=...))
case("job-id-space", (DLQ, "job_id missing or invalid"), json=body(job_id="a b"))
case("job-id-newline", (DLQ, "job_id missing or invalid"), json=body(job_id="hA19\n"))
case("job-id-traversal", (DLQ, "job_id missing or invalid"), json=body(job_id="../../etc"))
case("job-id-long", (DLQ, "job_id missing or invalid"), json=body(job_id="j" * 129))
case("job-id-int", (DLQ, "job_id missing or invalid"), json=body(job_id=42))
case("tenant-newline", (DLQ, "tenant_id missing or invalid"), json=body(tenant_id="hA19\n"))
case("tenant-unicode", (DLQ, "tenant_id missing or invalid"), json=body(tenant_id="acmé"))
case("input-missing", (DLQ, "input missing"), json=body(input=...))
case("input-https", (DLQ, "not an s3:// URI"), json=body(input="https://example.com/a.pdf"))
case("input-other-bucket", (DLQ, "is in bucket"),
     json=body(input="s3://other-bucket/tenants/acme/a.pdf"))
case("input-other-tenant", (DLQ, "outside 'tenants/acme/'"),
     json=body(input="s3://{B}/tenants/globex/in/good.pdf"))
case("input-traversal", (DLQ, "malformed S3 URI"),
     json=body(input="s3://{B}/tenants/acme/../globex/in/good.pdf"))
case("input-dot", (DLQ, "malformed S3 URI"), json=body(input="s3://{B}/tenants/acme/./in/good.pdf"))
case("input-empty-segment", (DLQ, "malformed S3 URI"),
     json=body(input="s3://{B}/tenants/acme//in/good.pdf"))
case("input-tab", (DLQ, "control characters"), json=body(input="s3://{B}/tenants/acme/in\t.pdf"))
case("output-other-tenant", (DLQ, "outside 'tenants/acme/'"),
     json=body(output="s3://{B}/tenants/globex/out/x.pdf"))
case("output-is-input", (DLQ, "must not overwrite the input"),
     json=body(output="s3://{B}/tenants/acme/in/good.pdf"))
case("layout-local-path", (DLQ, "layout must be"), json=body(layout="/etc/passwd"))
case("layout-relative-path", (DLQ, "layout must be"), json=body(layout="../../../../etc/passwd"))
case("preset-traversal", (DLQ, "a preset layout is"),
     json=body(layout={"preset": "../../../../etc/passwd"}))
case("preset-dev-zero", (DLQ, "a preset layout is"), json=body(layout={"preset": "/dev/zero"}))
case("preset-secret", (DLQ, "a preset layout is"), json=body(layout={"preset": "/tmp/" + SECRET_FILE}))
case("preset-extra-key", (DLQ, "a preset layout is"),
     json=body(layout={"preset": "a5-4up-sra3", "x": 1}))
case("layout-number", (DLQ, "layout missing"), json=body(layout=42))
case("layout-other-tenant", (DLQ, "outside 'tenants/acme/'"),
     json=body(layout="s3://{B}/tenants/globex/layout.json"))
case("layout-deep", (DLQ, "nests deeper than 32"), json=body(layout=json.loads("{\"a\":" * 40 + "1"
                                                                               + "}" * 40)))
case("webhook-number", (DLQ, "webhook missing: want a string"), json=body(webhook=123))
case("webhook-long", (DLQ, "webhook is longer than"), json=body(webhook="https://x/" + "a" * 3000))
case("token-control", (DLQ, "token must be"), json=body(token="order\u0007"))
case("token-long", (DLQ, "token must be"), json=body(token="t" * 300))
case("group-mismatch", (DLQ, "MessageGroupId 'globex' is not the tenant 'acme'"),
     json=body(job_id="acme-ok"), group="globex")

# -- bad input: the job fails once, as bad input, never retried --------------------------------
FAILED = "failed"
case("preset-unknown", (FAILED, "bad_layout", "unknown layout preset"),
     json=body(layout={"preset": "nosuch"}))
case("layout-absurd-size", (FAILED, "bad_layout", "layout field 'sheet.width'"),
     json=body(layout={"version": 1, "kind": "nup", "sheet": {"width": 1e308, "height": 100}}))
case("layout-unknown-field", (FAILED, "bad_layout", "unknown field"),
     json=body(layout={"version": 1, "kind": "nup", "sheet": "SRA3", "bleeed": 3}))
case("layout-file-not-json", (FAILED, "bad_layout", "is not JSON"),
     json=body(layout="s3://{B}/tenants/acme/layouts/not-json.json"))
case("layout-file-huge", (FAILED, "bad_layout", "the limit is 65536"),
     json=body(layout="s3://{B}/tenants/acme/layouts/huge.json"))
case("layout-file-missing", (FAILED, "bad_layout", "does not exist"),
     json=body(layout="s3://{B}/tenants/acme/layouts/missing.json"))
case("layout-file-deep", (FAILED, "bad_layout", "nests deeper than 32"),
     json=body(layout="s3://{B}/tenants/acme/layouts/deep.json"))
case("input-object-missing", (FAILED, "bad_pdf", "does not exist or is not readable"),
     json=body(input="s3://{B}/tenants/acme/in/missing.pdf"))
for name, kind, text in (("not-pdf", "bad_pdf", "input PDF"), ("empty", "bad_pdf", "input PDF"),
                         ("encrypted", "bad_pdf", "encrypted"), ("no-pages", "bad_pdf", "no pages"),
                         ("bomb", "too_large", "budget"),
                         ("no-mediabox", "bad_pdf", "MediaBox"), ("rotate-45", "bad_pdf", "Rotate"),
                         ("huge-page", "bad_layout", "layout field 'grid'"),
                         ("too-many-pages", "too_large", "pages; the budget allows")):
    case(f"pdf-{name}", (FAILED, kind, text), json=body(input=f"s3://{{B}}/tenants/acme/in/{name}.pdf"))

# -- webhooks to places imposer must not call: the job succeeds, the event is refused ----------
REFUSED = "refused"
for name, url, text in (
        ("metadata", "https://169.254.169.254/latest", "cloud metadata address"),
        ("http-loopback", "http://127.0.0.1:1/hook", "must be https"),
        ("file", "file:///etc/passwd", "must be https"),
        ("gopher", "gopher://hooks.acme.test/x", "must be https"),
        ("credentials", "https://user:pw@hooks.acme.test/x", "must not carry credentials"),
        ("off-list", "https://evil.example.com/x", "not on the tenant's webhook allow-list"),
        ("ipv6-loopback", "https://[::1]/x", "loopback address"),
        ("private", "https://10.0.0.1/x", "private address")):
    case(f"webhook-{name}", (REFUSED, text), json=body(webhook=url))

# -- other tenants ----------------------------------------------------------------------------
OK = "succeeded"
case("acme-shared-id", (OK,), json=body(job_id="shared-1"))
case("globex-shared-id", (OK,), json=body(job_id="shared-1", tenant_id="globex",
                                          input="s3://{B}/tenants/globex/in/good.pdf",
                                          output="s3://{B}/tenants/globex/out/shared-1.pdf"))
case("acme-ok", (OK,), json=body(job_id="acme-ok"))
case("globex-invalid-with-acme-id", (DLQ, "outside 'tenants/globex/'"),
     json=body(job_id="acme-ok", tenant_id="globex"), group="globex")
for n in range(4):
    case(f"sentinel-{n}", (OK,), json=body())


def plant(tmp: Path, storage_put) -> None:
    """Upload the corpus's objects: good artwork, bad PDFs and layout files."""
    good = numbered_pdf(tmp / "good.pdf", 4, *A5)
    for tenant in ("acme", "globex"):
        storage_put(f"tenants/{tenant}/in/good.pdf", good.read_bytes())
    bad = {
        "not-pdf": b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "empty": b"",
        "encrypted": _encrypted(tmp), "no-pages": _no_pages(tmp),
        "bomb": pdf_with(tmp, _bomb, name="bomb.pdf").read_bytes(),
        "no-mediabox": _no_mediabox(tmp),
        "rotate-45": pdf_with(tmp, lambda p: setattr(p.pages[0], "Rotate", 45),
                              name="rot.pdf").read_bytes(),
        "huge-page": numbered_pdf(tmp / "huge.pdf", 1, 14400, 14400).read_bytes(),
        "too-many-pages": pdf_with(tmp, pages=5001, name="many.pdf").read_bytes(),
    }
    for name, data in bad.items():
        storage_put(f"tenants/acme/in/{name}.pdf", data)
    storage_put("tenants/acme/layouts/not-json.json", b"{not json")
    storage_put("tenants/acme/layouts/huge.json", b"{" + b" " * 70000 + b"}")
    storage_put("tenants/acme/layouts/deep.json", b"[" * 100 + b"]" * 100)


def _bomb(pdf):
    stream = pikepdf.Stream(pdf, bomb(2 << 30))
    stream.Filter = Name.FlateDecode
    pdf.pages[0].Contents = stream


def _encrypted(tmp: Path) -> bytes:
    path = tmp / "enc.pdf"
    with pikepdf.open(numbered_pdf(tmp / "plain.pdf", 1, *A5)) as pdf:
        pdf.save(path, encryption=pikepdf.Encryption(user="u", owner="o"))
    return path.read_bytes()


def _no_pages(tmp: Path) -> bytes:
    pdf = pikepdf.new()
    path = tmp / "nopages.pdf"
    pdf.save(path)
    return path.read_bytes()


def _no_mediabox(tmp: Path) -> bytes:
    path = pdf_with(tmp, name="nomb.pdf")
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        del pdf.pages[0].obj["/MediaBox"]
        if "/MediaBox" in pdf.Root.Pages:
            del pdf.Root.Pages["/MediaBox"]
        pdf.save(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def corpus(aws_endpoint, tmp_path_factory):
    """Send every case, run one worker until the queue is empty, and gather what came of it."""
    from imposer.settings import Settings

    tmp = tmp_path_factory.mktemp("hostile")
    tag = uuid.uuid4().hex[:10]
    settings = Settings.load({}, host_id="hostile", heartbeat_seconds=1.0, lease_ttl_seconds=30.0,
                             defer_seconds=1.0, sweep_seconds=1.0, poll_seconds=1,
                             retry_seconds=0.0, queue_name=f"q-{tag}", dlq_name=f"q-{tag}-dlq",
                             bucket=f"b-{tag}", table_prefix=f"t-{tag}")
    provision(settings)
    backends = connect(settings)
    for tenant in ("acme", "globex"):
        backends.tenants.put(TenantConfig(tenant_id=tenant, webhook_secret="s3cret",
                                          webhook_hosts=("hooks.acme.test", "10.0.0.1", "::1",
                                                         "169.254.169.254", "127.0.0.1")))
    s3, sqs = boto3.client("s3"), boto3.client("sqs")
    plant(tmp, lambda key, data: s3.put_object(Bucket=settings.bucket, Key=key, Body=data))
    (Path("/tmp") / SECRET_FILE).write_text(json.dumps(
        {"version": 1, "kind": "nup", "sheet": "SRA3"}))
    url = sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
    sent = {}
    for name, send, _ in CASES:
        text = send["raw"] if "raw" in send else json.dumps(send["json"])
        text = text.replace("{B}", settings.bucket)
        group = send.get("group") or (send["json"].get("tenant_id") if "json" in send else None)
        sqs.send_message(QueueUrl=url, MessageBody=text, MessageGroupId=str(group or "acme"))
        sent[name] = text
    audit = tmp / "audit.log"
    worker = Worker(settings, tmp, "hostile", "--slots", "4", "--engine", "open",
                    "--exit-when-idle", env={
                        "PYTHONPATH": os.pathsep.join(filter(None, [
                            str(AUDIT), os.environ.get("PYTHONPATH")])),
                        "IMPOSER_AUDIT_LOG": str(audit), "IMPOSER_WORK_DIR": str(tmp / "work"),
                        "IMPOSER_WEBHOOK_SCHEDULE": "0.1", "IMPOSER_WEBHOOK_POLL_SECONDS": "0.2"})
    try:
        assert worker.wait(300) == 0, worker.tail()
    finally:
        worker.close()
    dlq_url = sqs.get_queue_url(QueueName=settings.dlq_name)["QueueUrl"]
    dead = {}
    while True:
        got = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                  MessageAttributeNames=["All"], VisibilityTimeout=300)
        if not got.get("Messages"):
            break
        for m in got["Messages"]:
            dead[m["Body"]] = m["MessageAttributes"]["imposer_error"]["StringValue"]
    return {"settings": settings, "backends": backends, "sent": sent, "dead": dead,
            "audit": audit.read_text().splitlines(), "worker": worker, "tmp": tmp}


def _record(corpus, name):
    data = json.loads(corpus["sent"][name])
    return corpus["backends"].jobs.get(data["tenant_id"], data["job_id"])


@pytest.mark.parametrize("name, send, outcome", CASES, ids=[c[0] for c in CASES])
def test_case(corpus, name, send, outcome):
    """Each hostile input ends in its one clear, intended fate."""
    text = corpus["sent"][name]
    if outcome[0] == DLQ:
        assert corpus["dead"].get(text) is not None, f"{name} was not dead-lettered"
        assert outcome[1] in corpus["dead"][text]
        if outcome[2:] == (RECORDED,):
            record = _record(corpus, name)
            assert record is not None, f"{name} left no record"
            assert (record.status.value, record.error_kind) == ("failed", "invalid_message")
            assert outcome[1] in record.error
        return
    assert text not in corpus["dead"], corpus["dead"].get(text)
    record = _record(corpus, name)
    assert record is not None, f"{name} left no record"
    if outcome[0] == FAILED:
        assert (record.status.value, record.error_kind) == ("failed", outcome[1]), record.error
        assert outcome[2] in record.error and record.attempts == 1
        assert str(corpus["tmp"]) not in record.error, "a reason shows the worker's paths"
    elif outcome[0] == REFUSED:
        assert record.status.value == "succeeded"
        event = corpus["backends"].outbox.get(record.webhook_event)
        assert (event.status, outcome[1] in event.last_error) == ("refused", True), event
    else:
        assert record.status.value == "succeeded", record.error


class TestTheRunAsAWhole:
    def test_worker_kept_serving(self, corpus):
        """Every good job among the hostile ones succeeded, the last one included."""
        for n in range(4):
            assert _record(corpus, f"sentinel-{n}").status.value == "succeeded"

    def test_no_lease_or_counter_leaked(self, corpus):
        """After the run no lease is left and every counter is back to zero."""
        leases = corpus["backends"].leases
        assert leases.leases() == []
        assert {t: (c.inflight, c.borrowed) for t, c in leases.counters().items()} == \
            {t: (0, 0) for t in leases.counters()}

    def test_same_job_id_in_two_tenants_are_two_jobs(self, corpus):
        """acme's and globex's shared-1 both ran, each into its own tenant's plate."""
        found = corpus["backends"].jobs.find("shared-1")
        assert sorted((r.tenant_id, r.status.value) for r in found) == [
            ("acme", "succeeded"), ("globex", "succeeded")]
        assert {r.output.split("/")[4] for r in found} == {"acme", "globex"}

    def test_another_tenants_message_cannot_touch_a_record(self, corpus):
        """globex's invalid message carrying acme-ok's id left acme's record as it was."""
        acme = corpus["backends"].jobs.get("acme", "acme-ok")
        assert (acme.tenant_id, acme.status.value, acme.error) == ("acme", "succeeded", None)
        globex = corpus["backends"].jobs.get("globex", "acme-ok")
        assert globex is not None and globex.status.value == "failed"

    def test_nothing_named_by_a_message_was_opened(self, corpus):
        """No process of the run opened a path a message named, nor the planted layout."""
        opened = {line.split(" ", 1)[1] for line in corpus["audit"]}
        assert opened, "the audit hook recorded nothing: is it installed?"
        for forbidden in ("/etc/passwd", "/dev/zero", "/tmp/" + SECRET_FILE):
            assert forbidden not in opened
        assert not [p for p in opened if "/../" in p or p.endswith("/..")]

    def test_job_files_stay_in_the_work_dir(self, corpus):
        """Every PDF or layout file the worker opened lies in its job directories."""
        work = str(corpus["tmp"] / "work")
        job_files = [p for p in {line.split(" ", 1)[1] for line in corpus["audit"]}
                     if p.endswith((".pdf", "layout.json"))]
        assert job_files and all(p.startswith(work) for p in job_files), job_files
