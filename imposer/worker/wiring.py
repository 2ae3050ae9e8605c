"""Build the stores and adapters from Settings: one place that wires the parent."""

from __future__ import annotations

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
