"""The composition root of the parent: the stores from Settings (``connect``), and the
whole worker from them (``build``).

Every part is made here, once, and handed to what uses it: one clock, one
metrics sink, one running table and one storage adapter for the whole
parent. Nothing else in ``imposer.worker`` builds another part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from imposer.aws.dynamodb import Dynamo
from imposer.aws.sqs import JobQueue
from imposer.clock import Clock, SystemClock
from imposer.metrics import Metrics
from imposer.settings import Settings
from imposer.state.jobs import JobStore
from imposer.state.leases import LeaseStore
from imposer.state.outbox import OutboxStore
from imposer.state.rollups import RollupStore
from imposer.state.tenants import TenantStore
from imposer.state.waiting import WaitingStore

if TYPE_CHECKING:
    from imposer.webhooks.delivery import WebhookSender
    from imposer.worker.dispatch.pool import Pool
    from imposer.worker.supervisor import Supervisor


@attrs.frozen(kw_only=True)
class Backends:
    """Everything the parent process uses to reach AWS state, for the composition root."""

    settings: Settings
    dynamo: Dynamo
    tenants: TenantStore
    leases: LeaseStore
    jobs: JobStore
    outbox: OutboxStore
    rollups: RollupStore
    waiting: WaitingStore
    queue: JobQueue
    metrics: Metrics
    clock: Clock


def connect(settings: Settings, clock: Clock | None = None,
            metrics: Metrics | None = None) -> Backends:
    clock = clock or SystemClock()
    dynamo = Dynamo(settings.region)
    tenants = TenantStore(dynamo, settings.tenants_table, settings.default_cap,
                          settings.cap_cache_seconds, clock)
    jobs = JobStore(dynamo, settings.jobs_table, clock, settings.job_retention_days)
    return Backends(
        settings=settings,
        dynamo=dynamo,
        tenants=tenants,
        leases=LeaseStore(dynamo, settings.leases_table, jobs, tenants,
                          settings.lease_ttl_seconds, clock,
                          share_half_life=settings.share_half_life),
        jobs=jobs,
        outbox=OutboxStore(dynamo, settings.outbox_table, clock, settings.job_retention_days),
        rollups=RollupStore(dynamo, settings.rollups_table),
        waiting=WaitingStore(dynamo, settings.waiting_table),
        queue=JobQueue(settings.region, settings.queue_name, settings.dlq_name,
                       settings.poll_seconds),
        metrics=metrics or Metrics(settings.metrics_namespace, clock),
        clock=clock,
    )


def build(settings: Settings, *, backends: Backends | None = None, pool: Pool | None = None,
          webhooks: WebhookSender | None = None, max_jobs: int | None = None,
          exit_when_idle: bool = False) -> Supervisor:
    """The parent of `imposer run`, every part made and joined: ready to ``run``.

    *backends* default to ``connect(settings)``, *pool* to one slot per
    ``settings.slots``, *webhooks* to the SSRF-guarded sender.
    """
    # Imported here, not with the stores: the operator commands that only ``connect`` must
    # not load the pool, and with it the engine (they start fast; tests/cli/test_cli.py).
    from imposer.aws import session
    from imposer.aws.s3 import Storage
    from imposer.webhooks.delivery import WebhookSender
    from imposer.webhooks.outbox import OutboxSender, Pacing, parse_schedule
    from imposer.worker.dispatch.borrowing import BorrowPolicy
    from imposer.worker.dispatch.capmemo import CapMemo
    from imposer.worker.dispatch.contention import ContentionMeter
    from imposer.worker.dispatch.deferral import Deferral
    from imposer.worker.dispatch.dispatcher import Dispatcher
    from imposer.worker.dispatch.duplicates import Duplicates
    from imposer.worker.dispatch.handoff import HandOff
    from imposer.worker.dispatch.launch import Launcher
    from imposer.worker.dispatch.pool import Pool
    from imposer.worker.dispatch.shares import SharePolicy
    from imposer.worker.boot import Startup, check_resources
    from imposer.worker.messages import Messages
    from imposer.worker.overrun import OverrunPolicy
    from imposer.worker.reaping import Reaper
    from imposer.worker.receive.intake import Intake
    from imposer.worker.receive.leftover import WorkLeft
    from imposer.worker.receive.receiver import Receiver
    from imposer.worker.receive.senders import SenderCheck
    from imposer.worker.receive.vetting import Vetting
    from imposer.worker.running import RunningTable
    from imposer.worker.settle.completion import Completer
    from imposer.worker.settle.ending import Ending
    from imposer.worker.settle.parked import ParkedStarts
    from imposer.worker.settle.promise import Promiser
    from imposer.worker.settle.refill import Refiller
    from imposer.worker.settle.settler import Settler
    from imposer.worker.settle.successor import Successors
    from imposer.worker.signals import StopRequests
    from imposer.worker.supervisor import Supervisor, Until
    from imposer.worker.threads import sweep as sweeping
    from imposer.worker.threads.gauges import ShareGaps, Utilisation
    from imposer.worker.threads.heartbeat import LeaseRenewer, MessageHolder
    from imposer.worker.threads.periodic import Periodic
    from imposer.worker.threads.rollup import RollupRecorder
    from imposer.worker.timing import LeaseTiming

    s, b = settings, backends or connect(settings)
    clock, metrics, leases = b.clock, b.metrics, b.leases
    pool = pool or Pool(s.slots, s)
    running, storage = RunningTable(), Storage(s.region)
    timing = LeaseTiming.from_settings(s)  # every share of the lease TTL, once
    messages = Messages(b.queue, s, clock, timing)
    overrun = OverrunPolicy(job_timeout=s.job_timeout_seconds, heartbeat=s.heartbeat_seconds)
    rollups = RollupRecorder(b.rollups, s.host_id, s.slots, clock)
    sender = OutboxSender(
        b.outbox, b.tenants, b.jobs, storage,
        webhooks or WebhookSender(allow_http_loopback=s.allow_http_loopback),
        Pacing(parse_schedule(s.webhook_schedule), s.webhook_poll_seconds), clock,
        metrics=metrics)
    borrowing = BorrowPolicy(s.borrow, s.reserve_slots, leases, b.jobs, b.tenants)
    contention = ContentionMeter(s.slots, 2 * s.defer_seconds + 5, clock, metrics, s.host_id)
    receiver = Receiver(b.queue, s.poll_seconds, timing.visibility, clock)
    handoff = HandOff(s, b.waiting, messages, clock, timing)
    shares = SharePolicy(half_life=s.share_half_life, host_id=s.host_id, slots=s.slots,
                         leases=leases, jobs=b.jobs, tenants=b.tenants, running=running,
                         clock=clock)
    launcher = Launcher(leases=leases, pool=pool, running=running, rollups=rollups,
                        contention=contention, overrun=overrun, metrics=metrics, clock=clock,
                        timing=timing)
    senders = SenderCheck(b.tenants, trusted=s.trusted_senders, require=s.require_senders,
                          whoami=lambda: session.caller_identity(s.region)[0]["UserId"])
    vet = Vetting(bucket=s.bucket, jobs=b.jobs, messages=messages, metrics=metrics,
                  senders=senders, clock=clock, outbox=b.outbox)
    deferral = Deferral(tenants=b.tenants, jobs=b.jobs, messages=messages, handoff=handoff,
                        metrics=metrics, contention=contention, rollups=rollups, clock=clock)
    duplicates = Duplicates(jobs=b.jobs, storage=storage, messages=messages, metrics=metrics,
                            deferral=deferral)
    memo = CapMemo(s.defer_seconds, clock)
    dispatch = Dispatcher(
        host_id=s.host_id, launcher=launcher, vet=vet, deferral=deferral,
        duplicates=duplicates, leases=leases, handoff=handoff,
        metrics=metrics, borrowing=borrowing, memo=memo, clock=clock, shares=shares)
    starts = ParkedStarts(host_id=s.host_id, dispatch=dispatch, launcher=launcher,
                          leases=leases, handoff=handoff, messages=messages, metrics=metrics,
                          clock=clock, shares=shares)
    refill = Refiller(slots=s.slots, starts=starts, memo=memo, handoff=handoff,
                      borrowing=borrowing, shares=shares)
    intake = Intake(receiver=receiver, dispatch=dispatch, refill=refill, pool=pool,
                    messages=messages, left=WorkLeft(b.queue, b.jobs, b.tenants), memo=memo,
                    clock=clock)
    ending = Ending(messages=messages, jobs=b.jobs, metrics=metrics, rollups=rollups,
                    clock=clock, wake_sender=sender.wake)
    completer = Completer(
        max_attempts=s.max_attempts, heartbeat=s.heartbeat_seconds,
        table=running, leases=leases, jobs=b.jobs, outbox=b.outbox, storage=storage,
        ending=ending, clock=clock)
    promiser = Promiser(host_id=s.host_id, starts=starts, pool=pool, leases=leases,
                        handoff=handoff, memo=memo, borrowing=borrowing, shares=shares)
    successors = Successors(handoff=handoff, pool=pool, borrowing=borrowing, launcher=launcher,
                            messages=messages, metrics=metrics, clock=clock)
    settler = Settler(completer=completer, promiser=promiser, successors=successors,
                      refill=refill, running=running, pool=pool, clock=clock, shares=shares)
    utilisation = Utilisation(host_id=s.host_id, pool=pool, handoff=handoff,
                              sender=sender, queue=b.queue, contention=contention,
                              rollups=rollups, metrics=metrics, clock=clock)
    threads = [
        Periodic("lease-renewer", s.heartbeat_seconds, LeaseRenewer(
            running, leases, overrun, timing, clock, pool.fence).beat),
        Periodic("message-holder", s.heartbeat_seconds, MessageHolder(running, messages).beat),
        Periodic("sweep", s.sweep_seconds, lambda: sweeping.sweep(
            leases, metrics, s.host_id, messages)),
        Periodic("utilisation", s.heartbeat_seconds, utilisation.sample),
        Periodic("rollups", s.rollup_seconds, rollups.flush, last_pass=True),  # (at stop too)
        Periodic("waiting-view", s.redrive_seconds, borrowing.refresh),
    ]
    if shares.enabled:
        threads.append(Periodic("share-view", s.redrive_seconds,
                                ShareGaps(shares, metrics).refresh))
    threads.append(sender)
    stops = StopRequests(s.grace_seconds, clock)
    views = [("borrow view", borrowing.refresh)] * s.borrow + \
        [("share view", shares.refresh)] * shares.enabled
    startup = Startup(
        s, clock=clock, stops=stops, pool=pool, threads=threads,
        reach=lambda: check_resources(b.queue, leases.dynamo, s),
        reclaim=lambda: sweeping.reclaim_host(leases, metrics, s.host_id, messages),
        views=views)
    reaper = Reaper(pool=pool, running=running, completer=completer, overrun=overrun,
                    clock=clock, wake=(receiver.wake_fd,))
    return Supervisor(
        s, stops=stops, startup=startup, reaper=reaper, threads=threads,
        intake=intake, dispatch=dispatch, settler=settler, running=running,
        until=Until(max_jobs, exit_when_idle))
