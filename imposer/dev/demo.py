"""`imposer demo`: watch fairness happen, with no AWS account and no licence.

It starts the embedded AWS stack in-process, makes print-ready sample
artwork, lets one noisy tenant burst 60 booklet jobs while three quiet
tenants send a few booklets, business cards and flyers a moment later, and
runs the worker (8 slots, the open engine) with a live view of who holds
which slots. Jobs are paced to a few seconds so the cap can be seen working.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import attrs
import click

from imposer import logs
from imposer.dev.localstack.stack import LocalStack
from imposer.aws.s3 import Storage
from imposer.dev.liveview import LiveView
from imposer.dev.samples import A5, CARD, DL, artwork
from imposer.models import S3Uri, TenantConfig
from imposer.models.signature import new_secret
from imposer.reports.formatting import format_seconds
from imposer.reports.stats import percentile
from imposer.settings import Settings
from imposer.state.provision import provision
from imposer.webhooks.delivery import WebhookSender
from imposer.worker.wiring import build, connect

NOISY = "noisy-print-co"
QUIET = ("quiet-books", "quiet-cards", "quiet-flyers")
#: tenant -> (artwork title, kind, trim size, pages, preset)
PRINT = {
    NOISY: ("Spring catalogue", "booklet", A5, 16, "a5-booklet-sra4"),
    "quiet-books": ("Poetry zine", "zine", A5, 8, "a5-booklet-sra4"),
    "quiet-cards": ("Ada Lovelace", "cards", CARD, 2, "business-cards-press-sra3"),
    "quiet-flyers": ("Open day", "flyer", DL, 2, "flyers-dl-4up-sra3"),
}


@attrs.frozen(kw_only=True)
class Plan:
    noisy_jobs: int
    quiet_jobs: int
    pace: float
    quiet_after: float
    tick: float


FULL = Plan(noisy_jobs=60, quiet_jobs=3, pace=3.0, quiet_after=4.0, tick=1.0)
FAST = Plan(noisy_jobs=24, quiet_jobs=2, pace=0.4, quiet_after=1.0, tick=0.5)


def start_redis(workdir: Path):
    """Start a private redis-server if the binary exists; return (url, process) or None."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(workdir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(200):
        try:
            redis.Redis.from_url(url).ping()
            return url, proc
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    return None


class Demo:
    """One demo run; ``run`` returns the exit code."""

    def __init__(self, plan: Plan, out: Path, echo: Callable[..., None],
                 redis_url: str | None = None) -> None:
        self.plan, self.out, self.echo = plan, out, echo
        self.redis_url = redis_url
        self.submitted: dict[str, list[str]] = {}
        self.refusals: list[str] = []
        self._stops: list[Callable[[], None]] = []
        self._began = time.monotonic()

    def say(self, text: str) -> None:
        self.echo(f"[{time.monotonic() - self._began:5.1f}s] {text}")

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        self.say("starting a local AWS stack (moto in this process; no AWS account needed)")
        stack = LocalStack(0).start()
        os.environ.update(AWS_ENDPOINT_URL=stack.url, AWS_ACCESS_KEY_ID="demo",
                          AWS_SECRET_ACCESS_KEY="demo", AWS_DEFAULT_REGION="us-east-1")
        os.environ.pop("AWS_PROFILE", None)
        log = open(self.out / "worker.log", "w")
        logs.setup("INFO", log)
        settings = Settings.load(
            {}, slots=8, default_cap=4, engine="open", host_id="demo-host",
            heartbeat_seconds=1.0, lease_ttl_seconds=20.0, sweep_seconds=2.0,
            defer_seconds=1.0, poll_seconds=1, pace_seconds=self.plan.pace,
            allow_http_loopback=True, grace_seconds=60.0, webhook_schedule="0.2,0.5,1,2",
            webhook_poll_seconds=0.5, rollup_seconds=1.0, work_dir=str(self.out / "work"))
        try:
            provision(settings)
            backends = connect(settings)
            admission, receiver = self._tenant_side(backends)
            return self._run(settings, backends, admission, receiver)
        finally:
            for stop in reversed(self._stops):
                stop()
            stack.stop()
            log.close()

    def _tenant_side(self, backends):
        """Redis-backed admission (layer 3) and a webhook receiver that confirms tokens."""
        from imposer.client import Admission
        from imposer.client.receiver import WebhookReceiver

        found = (self.redis_url, None) if self.redis_url else start_redis(self.out)
        admission = None
        if found:
            url, proc = found
            if proc is not None:
                self._stops.append(lambda: (proc.terminate(), proc.wait(5)))
            admission = Admission.from_url(url)
            self.say(f"admission control (layer 3) on: Redis at {url}")
        else:
            self.say("admission control (layer 3) OFF: no redis-server found "
                     "(apt-get install redis-server, or set IMPOSER_REDIS_URL)")
        secrets = {t: new_secret() for t in PRINT}
        receiver = WebhookReceiver(secrets, admission).start()
        self._stops.append(receiver.stop)
        for tenant, secret in secrets.items():
            backends.tenants.put(TenantConfig(tenant_id=tenant, webhook_secret=secret,
                                              webhook_hosts=("127.0.0.1",)))
        return admission, receiver

    def _run(self, settings, backends, admission, receiver) -> int:
        from imposer.client import AdmissionError, submit
        from imposer.client.aws import Aws

        art = self.out / "artwork"
        art.mkdir(exist_ok=True)
        files = {tenant: artwork(art / f"{tenant}.pdf", pages, *size, title=title, kind=kind)
                 for tenant, (title, kind, size, pages, _) in PRINT.items()}
        aws = Aws(region=settings.region)

        def send(tenant: str, token: str | None = None) -> None:
            try:
                req = submit(tenant, files[tenant], PRINT[tenant][4], token=token,
                             admission=admission, webhook=receiver.url(tenant),
                             bucket=settings.bucket, queue=settings.queue_name, aws=aws)
                self.submitted.setdefault(tenant, []).append(req.job_id)
            except AdmissionError as exc:
                self.refusals.append(f"{tenant}: {exc}")

        self.say(f"{NOISY} bursts {self.plan.noisy_jobs} booklet jobs (a re-print campaign)")
        with click.progressbar(range(self.plan.noisy_jobs), label="  submitting",
                               file=sys.stdout) as burst:
            for n in burst:
                send(NOISY, token=f"reprint-{n}")
        supervisor = build(settings, backends=backends, exit_when_idle=False,
                           webhooks=WebhookSender(allow_http_loopback=True))

        def quiet() -> None:
            supervisor.booted.wait(120)
            time.sleep(self.plan.quiet_after)
            for tenant in QUIET:
                for _ in range(self.plan.quiet_jobs):
                    send(tenant)
            if admission is not None:  # a webhook retry loop re-sends job 0: refused on purpose
                send(NOISY, token="reprint-0")
            supervisor.until = attrs.evolve(supervisor.until, idle=True)

        self.say(f"worker up: 8 slots, cap 4 per tenant; the quiet tenants send "
                 f"{self.plan.quiet_jobs} jobs each {self.plan.quiet_after:g}s later; every job "
                 f"takes at least {self.plan.pace:g}s")
        threading.Thread(target=quiet, daemon=True).start()
        view = LiveView(
            held=lambda: _count(lease.tenant_id for lease in backends.leases.leases()),
            done=lambda: {t: int(sum(backends.metrics.total("jobs", outcome=o, tenant_id=t)
                                     for o in ("succeeded", "failed", "dead"))) for t in PRINT},
            submitted=self.submitted, tenants=list(PRINT), slots=8, cap=4, tick=self.plan.tick,
            echo=self.echo, began=self._began)
        view.start()
        code = supervisor.run()
        view.stop()
        return code or self._report(settings, backends, receiver)

    def _report(self, settings, backends, receiver) -> int:
        plates = self.out / "plates"
        storage = Storage(settings.region)
        self.echo("")
        self.echo("What each tenant got (wait = from submission until a slot was free for it):")
        self.echo(f"  {'TENANT':16} {'JOBS':>4} {'DONE':>4} {'WAIT p50':>9} {'WAIT p95':>9} "
                  f"{'MOST SLOTS':>10} {'PARKED AT CAP':>13}")
        ok, most, quiet_waits = True, {}, []
        for tenant in PRINT:
            mine = backends.jobs.for_tenant(tenant, limit=1000)[0]
            done = [r for r in mine if r.status.value == "succeeded"]
            ok &= len(done) == len(self.submitted.get(tenant, []))
            waits = [r.queue_wait for r in done if r.queue_wait is not None]
            defers = int(backends.metrics.total("cap_defer", tenant_id=tenant))
            most[tenant] = max_overlap(mine)
            if tenant != NOISY:
                quiet_waits += waits
            self.echo(f"  {tenant:16} {len(mine):>4} {len(done):>4} "
                      f"{format_seconds(percentile(waits, 50)):>9} "
                      f"{format_seconds(percentile(waits, 95)):>9} {most[tenant]:>10} "
                      f"{defers:>13}")
            for r in done:
                target = plates / tenant / f"{r.job_id}.pdf"
                target.parent.mkdir(parents=True, exist_ok=True)
                storage.download(S3Uri.parse(r.output), target)
        self.echo("")
        self.echo(f"  The noisy tenant held at most {most[NOISY]} of the 8 slots (its cap is 4), "
                  f"so the quiet tenants' jobs waited at most "
                  f"{format_seconds(max(quiet_waits, default=0))} for a slot.")
        self.echo(f"  Plates: {plates}/<tenant>/ (press sheets with crop, fold and registration "
                  f"marks; open one)")
        self.echo(f"  Signed webhooks received and verified by the tenants: {len(receiver.events)}"
                  f" (rejected: {len(receiver.rejected)})")
        for line in self.refusals:
            self.echo(f"  Refused on purpose by the tenant's admission control (a re-sent job): "
                      f"{line}")
        self.echo(f"  Worker log (JSON lines): {self.out}/worker.log")
        self.say("done" if ok else "some jobs did not succeed: see the worker log")
        return 0 if ok else 1


def _count(tenants) -> dict[str, int]:
    out: dict[str, int] = {}
    for tenant in tenants:
        out[tenant] = out.get(tenant, 0) + 1
    return out


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


def run_demo(fast: bool, out: Path | None, echo: Callable[..., None]) -> int:
    out = out or Path(tempfile.mkdtemp(prefix="imposer-demo-"))
    return Demo(FAST if fast else FULL, out, echo, os.environ.get("IMPOSER_REDIS_URL")).run()
