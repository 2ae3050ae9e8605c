"""Reclaim leases of crashed workers and repair counters.

Safe to run from several hosts at once: each reclaim is a transaction
conditioned on the lease still being expired under the same epoch, so two
sweepers cannot both decrement a counter for one lease.
"""

from __future__ import annotations

import logging

import attrs

from imposer.logs import extra
from imposer.metrics import Metrics
from imposer.models import Lease
from imposer.state.leases import LeaseStore
from imposer.worker.messages import Messages

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class SweepReport:
    reclaimed: tuple[Lease, ...] = ()
    repaired: dict[str, tuple[int, int]] = attrs.field(factory=dict)


def sweep(store: LeaseStore, metrics: Metrics, host: str | None = None,
          messages: Messages | None = None) -> SweepReport:
    """Reclaim every expired lease, count ``lease_recovered``, repair counters.

    With *messages*, a reclaimed job's message is given back at once.
    """
    now = store.clock.time()
    reclaimed = []
    for lease in store.leases():
        if lease.expires_at >= now:
            continue
        reason = (f"lease on host {lease.host} slot {lease.slot} expired "
                  f"{now - lease.expires_at:.0f}s ago; waiting for redelivery")
        if store.reclaim(lease, reason):
            reclaimed.append(lease)
            _recovered(metrics, lease, "expired", host)
            _give_back(messages, lease)
    repaired = store.repair()
    return SweepReport(reclaimed=tuple(reclaimed), repaired=repaired)


def reclaim_expired(store: LeaseStore, metrics: Metrics, lease: Lease,
                    host: str | None = None) -> bool:
    """Reclaim one expired lease found in the way of a new delivery."""
    reason = f"lease on host {lease.host} slot {lease.slot} expired; reclaimed on redelivery"
    if store.reclaim(lease, reason):
        _recovered(metrics, lease, "expired", host)
        return True
    return False


def reclaim_host(store: LeaseStore, metrics: Metrics, host: str,
                 messages: Messages | None = None) -> list[Lease]:
    """On start, take back at once every lease a previous incarnation of *host* left."""
    reclaimed = []
    for lease in store.leases():
        if lease.host != host:
            continue
        reason = f"host {host} restarted while running it; waiting for redelivery"
        if store.reclaim(lease, reason, own_host=host):
            reclaimed.append(lease)
            _recovered(metrics, lease, "restart", host)
            _give_back(messages, lease)
    return reclaimed


def _give_back(messages: Messages | None, lease: Lease) -> None:
    """Make the reclaimed job's message visible now (if its receipt is still valid)."""
    if messages is None or not lease.receipt:
        return
    failed = messages.give_back_quietly(lease.receipt)
    if failed is not None:
        logger.info("could not return message of %s early: %s", lease.job_id, failed,
                    extra=extra("message_return_skipped", lease.tenant_id, lease.job_id))


def _recovered(metrics: Metrics, lease: Lease, why: str, sweeper: str | None) -> None:
    metrics.emit("lease_recovered", 1, tenant_id=lease.tenant_id, host=lease.host)
    logger.warning("reclaimed %s lease of job %s (host %s, slot %s)", why, lease.job_id,
                   lease.host, lease.slot,
                   extra=extra("lease_recovered", lease.tenant_id, lease.job_id,
                               holder=lease.host, slot=lease.slot, why=why, sweeper=sweeper))
