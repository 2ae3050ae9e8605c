"""The lease layer: the per-tenant cap, atomic across processes and hosts.

The leases table holds two kinds of small, hot items: ``counter#<tenant>``
(``inflight``, and ``ver`` bumped by every transaction that touches it) and
``lease#<job>``. Every change of a tenant's leases changes its counter in the
same TransactWriteItems, so ``inflight`` always equals the live leases; the
``ver`` lets a repair prove nothing moved while it looked. With fair share on
(``share_half_life``), a third kind, ``usage#<tenant>``, holds the tenant's
forward-decayed licence-seconds, charged by the release that ends each job.

The transactions are here, their items in ``lease_items``; reading the table
and repairing a counter in ``lease_book``, which ``LeaseStore`` extends.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Sequence

import attrs

from imposer.aws.dynamodb import Dynamo, TransactionCancelled
from imposer.aws.tables import TableSpec
from imposer.clock import Clock, SystemClock
from imposer.errors import AcquireUncertain, BackendError, LeaseLost, MissingResource
from imposer.logs import extra
from imposer.models import JobRequest, JobStatus, Lease, Received
from imposer.models.usage import forward_charge
from imposer.state import lease_items
from imposer.state.jobs import JobStore
from imposer.state.lease_book import LeaseBook
from imposer.state.lease_items import request_token
from imposer.state.tenants import TenantStore
from imposer.state.verdicts import Acquisition, Successor, Verdict, why_refused

logger = logging.getLogger(__name__)


def table_spec(name: str) -> TableSpec:
    """Small, hot items: live leases and one counter per tenant; no index needed."""
    return TableSpec(name=name, hash_key="pk")


class LeaseStore(LeaseBook):
    """Acquire, renew, release and reclaim leases (and read them: ``LeaseBook``)."""

    def __init__(self, dynamo: Dynamo, leases_table: str, jobs: JobStore,
                 tenants: TenantStore, ttl: float, clock: Clock | None = None,
                 share_half_life: float = 0.0) -> None:
        super().__init__(dynamo, leases_table)
        self.jobs, self.jobs_table, self.tenants = jobs, jobs.table, tenants
        self.ttl = ttl
        self.clock = clock or SystemClock()
        #: Fair share's usage half-life (IMPOSER_SHARE_HALF_LIFE): above 0, each release
        #: charges the job's licence-seconds to its tenant's usage item.
        self.share_half_life = share_half_life

    # -- acquire ---------------------------------------------------------
    def acquire(self, request: JobRequest, host: str, slot: int,
                sent_at: float | None = None, receipt: str | None = None,
                borrow: bool = False, also: Sequence[dict[str, Any]] = (),
                limit: int | None = None) -> Acquisition:
        """Take a slot for *request* in one transaction, or say why not.

        With *borrow*, take it beyond the tenant's cap: allowed only while the
        tenant is at its cap, and counted in ``borrowed`` so that ``inflight``
        stays an exact count of the capped, non-borrowed leases. *also* are
        items that must commit with it (taking a parked note). A *limit* below
        the cap bounds the counter further (fair share: the slots its decision
        counted, plus one); refused by it, the verdict is AT_CAP with the cap.
        """
        tenant = request.tenant_id
        cap = self.tenants.cap_for(tenant)
        if cap <= 0:  # a paused tenant; the condition below cannot say so without a counter
            return Acquisition(verdict=Verdict.AT_CAP, cap=cap)
        now = self.clock.time()
        lease = self.new_lease(request, host, slot, receipt, borrow)
        bound = cap if limit is None or borrow else max(1, min(cap, limit))
        items = [lease_items.take(self.table, tenant, bound, borrow),
                 *lease_items.start(self.table, self.jobs_table, request, lease, sent_at), *also]
        refused = self._transact_acquire(items, f"acquire lease for {request.key}", [lease])
        if refused is not None:
            return why_refused(refused, cap, now)
        return Acquisition(verdict=Verdict.ACQUIRED, cap=cap, lease=lease)

    def acquire_burst(self, burst: Sequence[tuple[JobRequest, Received]], host: str,
                      slots: Sequence[int]) -> tuple[list[Lease], int]:
        """Take slots for up to the cap of one tenant's jobs in one transaction: all, or none.

        Returns the leases (for the first of *burst*, in order, on the first
        of *slots*) and the tenant's cap. No lease: nothing was written (no
        room under the cap for them all, a job running or final), and the
        caller acquires them one by one, which says why.
        """
        tenant = burst[0][0].tenant_id
        cap = self.tenants.cap_for(tenant)
        count = min(len(burst), len(slots), cap)
        if count < 2:
            return [], cap
        leases, items = [], [lease_items.take(self.table, tenant, cap, False, count)]
        for (request, message), slot in zip(burst[:count], slots):
            leases.append(self.new_lease(request, host, slot, message.receipt))
            items += lease_items.start(self.table, self.jobs_table, request, leases[-1],
                                       message.sent_at)
        if self._transact_acquire(items, f"acquire {count} leases for {tenant}", leases):
            return [], cap
        return leases, cap

    def _transact_acquire(self, items: list[dict[str, Any]], what: str,
                          leases: list[Lease]) -> TransactionCancelled | None:
        """Run an acquire's transaction: its cancellation, or None once committed. An error
        botocore's retries gave up on may hide a commit: AcquireUncertain, with *leases*."""
        try:
            self.dynamo.transact(items, what)
        except TransactionCancelled as exc:
            return exc
        except MissingResource:
            raise
        except BackendError as exc:
            raise AcquireUncertain(str(exc), *leases) from exc
        return None

    def cap_for(self, tenant: str) -> int:
        """The tenant's cap, as the acquire reads it (``TenantStore.cap_for``, cached)."""
        return self.tenants.cap_for(tenant)

    def new_lease(self, request: JobRequest, host: str, slot: int, receipt: str | None = None,
                  borrow: bool = False) -> Lease:
        """A lease for *request*, from now, with a new fencing epoch (not yet taken)."""
        now = self.clock.time()
        return Lease(tenant_id=request.tenant_id, job_id=request.job_id, host=host, slot=slot,
                     epoch=uuid.uuid4().hex, acquired_at=now, expires_at=now + self.ttl,
                     receipt=receipt, borrowed=borrow)

    # -- renew and release -------------------------------------------------
    def renew(self, lease: Lease) -> Lease:
        """Extend *lease*; raise LeaseLost if it is no longer ours."""
        expires = self.clock.time() + self.ttl
        ok = self.dynamo.update(
            self.table, {"pk": lease.key}, "SET expires_at = :x",
            values={":x": expires, ":e": lease.epoch}, condition="epoch = :e")
        if not ok:
            raise LeaseLost(f"lease of job {lease.job_id} was reclaimed (epoch {lease.epoch})")
        return attrs.evolve(lease, expires_at=expires)

    def release(self, lease: Lease, status: JobStatus, failures: int = 0,
                also: Sequence[dict[str, Any]] = (), ended_at: float | None = None,
                **fields: Any) -> None:
        """Give the slot back and record the job's state in one transaction.

        *also* are further transaction items that must commit with it (the
        completion event's outbox entry). A final status takes the job out of
        the open index and sets its expiry in the same write. Raises LeaseLost
        when the lease was reclaimed meanwhile: the counter was already
        decremented by the reclaim and must not be again.

        A release whose reply was lost is not lost: every try of it carries
        the same ClientRequestToken (DynamoDB answers a repeat as the success
        it was), and a try that is refused because the lease is gone reads the
        job record, which says whether our own release is what took it.
        """
        items = [*self._release_items(lease, status, failures, fields, ended_at), *also]
        items.insert(1, lease_items.give_back(self.table, lease))
        try:
            self._transact_fenced(items, lease, "release",
                                  token=request_token(lease.epoch, f"release/{status.value}"))
        except LeaseLost:
            if status == JobStatus.QUEUED or not self.released(lease, status):
                raise  # (queued is what a reclaim writes too: that record cannot tell)
            logger.warning("the reply to the release of job %s was lost; the job record shows "
                           "it committed", lease.job_id,
                           extra=extra("release_reply_lost", lease.tenant_id, lease.job_id))

    def hand_over(self, lease: Lease, status: JobStatus, successor: Successor,
                  failures: int = 0, also: Sequence[dict[str, Any]] = (),
                  ended_at: float | None = None, **fields: Any) -> bool:
        """Release *lease* and start a parked job in its slot, in one transaction.

        For the tenant's next own job the counter does not move (one job
        ends, one of the same tenant starts) but must not be above the
        tenant's cap. A *borrowed* successor (``successor.lease.borrowed``)
        takes the slot as ``acquire(borrow=True)`` would, only while its
        tenant is at its cap (``successor.cap``): of the same tenant as a
        borrowed *lease*, its counter does not move either; of another
        tenant, this lease's counter gives one back and the successor's
        borrows one (``lease_items.hand_on``). The successor's note is
        claimed in the same write, so two hosts never start one note, and
        this is an acquire and a release with one call fewer. True once
        committed; False when the successor's part was refused, or an earlier
        plain release (its reply lost) ended the lease: nothing was written,
        release as usual. Raises LeaseLost as ``release`` does. Every try of
        one hand-over is the same request, with one ClientRequestToken.
        """
        items = self._release_items(lease, status, failures, fields, ended_at)
        first, *theirs = lease_items.hand_on(self.table, lease, successor.lease, successor.cap)
        items.insert(1, first)
        items += [*also, *theirs, *lease_items.start(self.table, self.jobs_table,
                                                   successor.request, successor.lease,
                                                   successor.sent_at), successor.claim]
        token = request_token(lease.epoch, f"hand-over/{successor.lease.epoch}/{status.value}")
        try:
            self.dynamo.transact(items, f"hand over lease of {lease.job_id} to "
                                 f"{successor.request.job_id}", token=token)
        except TransactionCancelled as exc:
            if len(exc.reasons) != len(items):
                raise BackendError(f"unexpected cancellation of a hand-over: {exc}") from None
            if not (exc.reasons[0].failed or exc.reasons[2].failed):
                return False  # the successor's part: the cap, its record, or its note
            if status == JobStatus.QUEUED or not self.released(lease, status):
                raise LeaseLost(f"release of job {lease.job_id} refused: lease epoch "
                                f"{lease.epoch} is no longer current") from None
            done = self.jobs.started_under(successor.request, successor.lease.epoch)
            logger.warning("the reply to %s of job %s was lost; the job record shows it committed",
                           "the hand-over" if done else "an earlier release (not this hand-over)",
                           lease.job_id, extra=extra("release_reply_lost", lease.tenant_id,
                                                     lease.job_id))
            return done
        return True

    def _release_items(self, lease: Lease, status: JobStatus, failures: int,
                       fields: dict[str, Any], ended_at: float | None = None
                       ) -> list[dict[str, Any]]:
        """The lease's end, then (fair share on) the charge of its licence-seconds: after
        the items whose cancellation reasons the callers read by position.

        *ended_at* (else the record's ``finished_at``) is when the job ended, the
        same on every try of one release: a try must repeat its first request
        exactly, or DynamoDB refuses the ClientRequestToken. A job given back
        unstarted (QUEUED) used no licence time and is charged nothing.
        """
        finished = ended_at or fields.get("finished_at") or self.clock.time()
        items = lease_items.end(self.table, self.jobs_table, lease, status, failures, fields,
                                finished, self.jobs.retention_days)
        if self.share_half_life > 0 and status != JobStatus.QUEUED:
            used = max(0.0, finished - lease.acquired_at)
            items.append(lease_items.charge(
                self.table, lease.tenant_id,
                *forward_charge(used, finished, self.share_half_life)))
        return items

    def released(self, lease: Lease, status: JobStatus) -> bool:
        """Say whether the job record shows *lease*'s own release to *status* committed.

        Only that release gives the record a status other than running or
        queued under the lease's epoch: acquire writes running, a reclaim
        queued, and a new attempt a new epoch; a final record is never
        reopened. A success also names the epoch as its output's.
        """
        record = self.jobs.get(lease.tenant_id, lease.job_id)
        return (record is not None and record.epoch == lease.epoch and record.status == status
                and (status != JobStatus.SUCCEEDED or record.output_epoch == lease.epoch))

    def _transact_fenced(self, items: list, lease: Lease, what: str,
                         token: str | None = None) -> None:
        for attempt in range(2):
            try:
                # the try after a repair is a new request: its first was refused, not lost
                self.dynamo.transact(items, f"{what} lease of {lease.job_id}",
                                     token=request_token(token, "repaired") if attempt and token
                                     else token)
                return
            except TransactionCancelled as exc:
                if len(exc.reasons) != len(items):
                    raise BackendError(f"unexpected cancellation of {what}: {exc}") from None
                lease_r, counter_r, job_r = exc.reasons[:3]
                if lease_r.failed or job_r.failed:
                    raise LeaseLost(
                        f"{what} of job {lease.job_id} refused: lease epoch {lease.epoch} "
                        "is no longer current") from None
                if attempt:
                    raise
                logger.error("counter of %s disagrees with its leases; repairing",
                             lease.tenant_id, extra=extra("counter_mismatch", lease.tenant_id,
                                                          lease.job_id))
                self.repair(lease.tenant_id)

    # -- reclaim -------------------------------------------------------------
    def reclaim(self, lease: Lease, reason: str, own_host: str | None = None) -> bool:
        """Take back an expired lease (or any lease of *own_host*) in one transaction.

        Returns False when someone renewed, released or reclaimed it first.
        Fair share on, the job's licence time up to its last renewal (its host
        was alive then; what came after is not known) is charged to its tenant
        in the same transaction, as a release would charge it.
        """
        items = lease_items.take_back(
            self.table, self.jobs_table, lease, reason,
            expired_before=self.clock.time() if own_host is None else None, host=own_host)
        renewed = lease.expires_at - self.ttl
        if self.share_half_life > 0 and renewed > lease.acquired_at:
            items.append(lease_items.charge(
                self.table, lease.tenant_id,
                *forward_charge(renewed - lease.acquired_at, renewed, self.share_half_life)))
        try:
            self._transact_fenced(items, lease, "reclaim")
        except LeaseLost:
            return False
        return True
