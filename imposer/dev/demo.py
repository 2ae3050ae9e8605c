"""`imposer demo`: watch fairness happen, with no AWS account and no licence.

It starts the embedded AWS stack in-process, provisions it, makes sample
artwork, lets one noisy tenant burst while three quiet tenants send a few
jobs a moment later, and runs the worker (8 slots, open engine) with a live
per-tenant view. Jobs are paced to a few seconds so the cap is visible.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import attrs

from imposer import logs
from imposer.aws.localstack import LocalStack
from imposer.aws.s3 import Storage
from imposer.dev.samples import A5, numbered_pdf
from imposer.models import TenantConfig
from imposer.reports.formatting import format_seconds
from imposer.reports.stats import percentile
from imposer.settings import Settings
from imposer.state.provision import provision
from imposer.webhooks.delivery import WebhookSender
from imposer.worker.supervisor import Supervisor
from imposer.worker.threads import Periodic
from imposer.worker.wiring import connect

NOISY = "noisy-print-co"
QUIET = ("quiet-books", "quiet-cards", "quiet-flyers")


@attrs.frozen(kw_only=True)
class Plan:
    noisy_jobs: int
    quiet_jobs: int
    pace: float
    quiet_after: float
    tick: float


FULL = Plan(noisy_jobs=60, quiet_jobs=3, pace=3.0, quiet_after=4.0, tick=2.0)
FAST = Plan(noisy_jobs=24, quiet_jobs=2, pace=0.4, quiet_after=1.0, tick=0.5)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_redis(workdir: Path):
    """Start a private redis-server if the binary exists; return (url, process) or None."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    port = _free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(workdir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            return url, proc
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    return None


class Demo:
    """One demo run; ``run`` returns the exit code."""

    def __init__(self, plan: Plan, out: Path, echo: Callable[[str], None],
                 redis_url: str | None = None) -> None:
        self.plan, self.out, self.echo = plan, out, echo
        self.redis_url = redis_url
        self.submitted: dict[str, list[str]] = {}
        self.refusals: list[str] = []

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        stack = LocalStack(0).start()
        os.environ.update(AWS_ENDPOINT_URL=stack.url, AWS_ACCESS_KEY_ID="demo",
                          AWS_SECRET_ACCESS_KEY="demo", AWS_DEFAULT_REGION="us-east-1")
        os.environ.pop("AWS_PROFILE", None)
        log = open(self.out / "worker.log", "w")
        logs.setup("INFO", log)
        settings = Settings.load(
            {}, slots=8, default_cap=4, engine="open", host_id="demo-host",
            heartbeat_seconds=1.0, lease_ttl_seconds=20.0, sweep_seconds=2.0,
            defer_seconds=1.0 if self.plan.pace < 1 else 2.0, poll_seconds=1,
            pace_seconds=self.plan.pace, allow_http_loopback=True, grace_seconds=60.0,
            webhook_schedule="0.2,0.5,1,2", webhook_poll_seconds=0.5, rollup_seconds=1.0)
        self.echo(f"local AWS stack at {stack.url} (in-process moto, serializable DynamoDB)")
        provision(settings)
        backends = connect(settings)
        helpers = self._admission(backends)
        try:
            return self._run(settings, backends, *helpers)
        finally:
            for stop in reversed(self._stops):
                stop()
            stack.stop()
            log.close()

    def _admission(self, backends):
        """Redis-backed admission and a webhook receiver that confirms tokens."""
        from imposer.client import Admission
        from imposer.client.receiver import WebhookReceiver

        self._stops: list[Callable[[], None]] = []
        found = (self.redis_url, None) if self.redis_url else start_redis(self.out)
        admission = None
        if found:
            url, proc = found
            if proc is not None:
                self._stops.append(lambda: (proc.terminate(), proc.wait(5)))
            admission = Admission.from_url(url)
            self.echo(f"admission control (layer 3) on: Redis at {url}")
        else:
            self.echo("admission control (layer 3) OFF: no redis-server found "
                      "(apt-get install redis-server, or set IMPOSER_REDIS_URL)")
        secrets = {t: f"secret-{t}" for t in (NOISY, *QUIET)}
        receiver = WebhookReceiver(secrets, admission).start()
        self._stops.append(receiver.stop)
        for tenant, secret in secrets.items():
            backends.tenants.put(TenantConfig(tenant_id=tenant, webhook_secret=secret,
                                              webhook_hosts=("127.0.0.1",)))
        return admission, receiver

    def _run(self, settings, backends, admission, receiver) -> int:
        from imposer.client import AdmissionError, submit

        art = self.out / "artwork"
        art.mkdir(exist_ok=True)
        booklet = numbered_pdf(art / "booklet-a5.pdf", 16, *A5)
        flyer = numbered_pdf(art / "flyers-a5.pdf", 4, *A5)

        def send(tenant: str, pdf: Path, layout: str, token: str | None = None) -> None:
            try:
                req = submit(tenant, pdf, layout, token=token, admission=admission,
                             webhook=receiver.url(tenant), bucket=settings.bucket,
                             queue=settings.queue_name)
                self.submitted.setdefault(tenant, []).append(req.job_id)
            except AdmissionError as exc:
                self.refusals.append(f"{tenant}: {exc}")

        for n in range(self.plan.noisy_jobs):
            send(NOISY, booklet, "a5-booklet-a4", token=f"reprint-{n}")
        self.echo(f"{NOISY} burst: {self.plan.noisy_jobs} jobs queued; the worker starts 8 slots "
                  f"(cap 4 per tenant); quiet tenants follow {self.plan.quiet_after:g}s after it "
                  f"is up; each job is paced to {self.plan.pace:g}s")

        # The worker may only stop once the quiet tenants have sent their jobs.
        supervisor = Supervisor(backends, exit_when_idle=False,
                                sender=WebhookSender(allow_http_loopback=True))

        def quiet() -> None:
            supervisor.booted.wait(120)
            time.sleep(self.plan.quiet_after)
            for tenant in QUIET:
                for _ in range(self.plan.quiet_jobs):
                    send(tenant, flyer, "a5-4up-sra3")
            if admission is not None:  # a webhook-retry loop re-sends a job: refused
                send(NOISY, booklet, "a5-booklet-a4", token="reprint-0")
            supervisor.exit_when_idle = True

        threading.Thread(target=quiet, daemon=True).start()
        view = LiveView(backends, self.echo, self.plan.tick, self.submitted)
        view.start()
        began = time.monotonic()
        code = supervisor.run()
        view.stop()
        took = time.monotonic() - began
        return code or self._report(settings, backends, receiver, took)

    def _report(self, settings, backends, receiver, took: float) -> int:
        records = [r for tenant in (NOISY, *QUIET)
                   for r in backends.jobs.for_tenant(tenant, limit=1000)[0]]
        plates = self.out / "plates"
        storage = Storage(settings.region)
        from imposer.models import S3Uri

        self.echo("")
        self.echo(f"{'TENANT':16} {'JOBS':>4} {'DONE':>4} {'WAIT p50':>9} {'WAIT p95':>9} "
                  f"{'MAX SLOTS':>9} {'CAP DEFERS':>10}")
        ok = True
        for tenant in (NOISY, *QUIET):
            mine = [r for r in records if r.tenant_id == tenant]
            done = [r for r in mine if r.status.value == "succeeded"]
            ok &= len(done) == len(self.submitted.get(tenant, []))
            waits = [r.queue_wait for r in done if r.queue_wait is not None]
            defers = backends.metrics.total("cap_defer", tenant_id=tenant)
            self.echo(f"{tenant:16} {len(mine):>4} {len(done):>4} "
                      f"{format_seconds(percentile(waits, 50)):>9} {format_seconds(percentile(waits, 95)):>9} "
                      f"{max_overlap(mine):>9} {int(defers):>10}")
            for r in done:
                target = plates / tenant / f"{r.job_id}.pdf"
                target.parent.mkdir(parents=True, exist_ok=True)
                storage.download(S3Uri.parse(r.output), target)
        self.echo("")
        self.echo(f"finished in {took:.0f}s; plate files in {plates}/<tenant>/ "
                  f"(press-ready PDFs with TrimBox/BleedBox); worker log: {self.out}/worker.log")
        self.echo(f"webhooks verified and confirmed: {len(receiver.events)}; "
                  f"rejected: {len(receiver.rejected)}")
        for line in self.refusals:
            self.echo(f"admission refused {line}")
        if not ok:
            self.echo("some jobs did not succeed: see the worker log")
        return 0 if ok else 1


def max_overlap(records) -> int:
    """Most jobs of *records* that held a slot at the same moment."""
    edges = []
    for r in records:
        if r.started_at is not None and r.finished_at is not None:
            edges += [(r.started_at, 1), (r.finished_at, -1)]
    held = best = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        held += step
        best = max(best, held)
    return best


class LiveView:
    """Print one line per tick: per tenant slots held / waiting / done."""

    def __init__(self, backends, echo, tick: float, submitted: dict) -> None:
        self.b, self.echo, self.submitted = backends, echo, submitted
        self._thread = Periodic("live-view", tick, self.line)
        self._began = time.monotonic()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._thread.stop(5)
        self.line()

    def line(self) -> None:
        held: dict[str, int] = {}
        for lease in self.b.leases.leases():
            held[lease.tenant_id] = held.get(lease.tenant_id, 0) + 1
        done: dict[str, int] = {}
        for tenant in (NOISY, *QUIET):
            done[tenant] = sum(int(self.b.metrics.total("jobs", outcome=o, tenant_id=tenant))
                               for o in ("succeeded", "failed", "dead"))
        parts = []
        for tenant in (NOISY, *QUIET):
            total = len(self.submitted.get(tenant, []))
            h, d = held.get(tenant, 0), done.get(tenant, 0)
            parts.append(f"{tenant.split('-')[1] if '-' in tenant else tenant}: "
                         f"{'#' * h}{'.' * (4 - h)} {h} run {total - h - d:>2} wait {d:>2} done")
        self.echo(f"[{time.monotonic() - self._began:5.1f}s] " + " | ".join(parts))


def run_demo(fast: bool, out: Path | None, echo: Callable[[str], None]) -> int:
    out = out or Path(tempfile.mkdtemp(prefix="imposer-demo-"))
    return Demo(FAST if fast else FULL, out, echo, os.environ.get("IMPOSER_REDIS_URL")).run()
