"""The dispatch policy's decisions, as pure functions: the worker and the simulator share them.

Everything here is arithmetic on counts and times, with no AWS and no
clock, so ``imposer simulate`` replays imposer's own rules in virtual time
and cannot drift from what `imposer run` does. The worker's modules call
these; the transactions that enforce them live in ``imposer.state.leases``.
"""

from __future__ import annotations

from typing import Collection, Iterable, Mapping, Sequence, TypeVar

import attrs

from imposer import backoff
from imposer.models.usage import (  # noqa: F401 (the policy's arithmetic, written once)
    ERA_HALF_LIVES,
    decayed,
    era_of,
    fold,
    forward_charge,
    running_usage,
    typical_run,
    usage_at,
)

T = TypeVar("T")

#: A tenant's oldest parked notes one read takes (one waiting-table Query). The hand-offs
#: after it take the next of them, so one read serves up to this many (its capacity units
#: are spent once); and the wider it is, the later hosts stealing from each other meet.
NOTES_READ = 32
#: Messages one receive returns at most (SQS's limit).
RECEIVE_MAX = 10
#: A tenant found at its cap is taken to be at it for this long, or the deferral interval
#: if shorter, unless one of its jobs ends here (``CapMemo``: no transaction).
CAP_MEMO_SECONDS = 1.0


def may_take_own_slot(inflight: int, cap: int) -> bool:
    """The cap (layer 2): a tenant may start a job while it holds fewer than its cap.

    A cap of 0 pauses the tenant. The acquire transaction's condition is this
    rule, evaluated atomically in DynamoDB.
    """
    return cap > 0 and inflight < cap


def why_not_borrow(enabled: bool, free_slots: int, reserve: int, tenant: str,
                   blockers: Iterable[str], express: Collection[str] = ()) -> str | None:
    """Say why a tenant at its cap may not borrow an idle slot now, or None if it may.

    Borrowed work never leaves fewer than *reserve* slots of a host free (a tenant of
    the *express* class may take those too), and nobody borrows while another tenant
    below its cap has work waiting.
    """
    if not enabled:
        return "borrowing is off"
    kept = 0 if tenant in express else reserve
    if free_slots <= kept:
        return f"only {free_slots} slot(s) free; {kept} kept in reserve"
    others = sorted(set(blockers) - {tenant})
    if others:
        return f"tenants below their cap are waiting: {', '.join(others)}"
    return None


def borrow_turns(enabled: bool, free_slots: int, reserve: int, borrowers: Mapping[str, int],
                 blockers: Iterable[str], express: Collection[str] = ()) -> list[str]:
    """Which capped tenants' parked jobs this host's idle slots go to now, one per slot.

    *borrowers* are tenants at their cap with parked work, each with the
    slots it borrows already. Every turn obeys ``why_not_borrow`` as the
    free slots run down (so the reserve stays free and nobody borrows while
    a tenant below its cap waits), and goes to the tenant that borrows
    fewest so far (ties by name), so two capped tenants share the idle
    slots rather than the first taking them all. The caller claims one of
    the tenant's parked notes per turn, in the acquire transaction. The
    reserve's turns go to *express* borrowers only.
    """
    held, turns = dict(borrowers), []
    blockers, express = frozenset(blockers), frozenset(express)
    least = 0 if express & held.keys() else reserve
    for taken in range(max(0, free_slots - least)):
        allowed = [t for t in held if why_not_borrow(enabled, free_slots - taken, reserve, t,
                                                     blockers, express) is None]
        if not allowed:
            break
        tenant = min(allowed, key=lambda t: (held[t], t))
        held[tenant] += 1
        turns.append(tenant)
    return turns


def receive_size(free_slots: int, parked_last: int) -> int:
    """How many messages one receive asks for: one per free slot, and room for parking.

    A message of a tenant at its cap takes no slot: it is parked. When the
    last batch parked *parked_last* messages (the queue is handing this host
    a capped backlog), the next receive asks for that many more, up to SQS's
    10, so the backlog is parked ten at a time rather than one per free slot
    (a host whose only free slot is its borrowing reserve would otherwise
    receive it one message at a time). One that then finds no free slot is
    parked only if its tenant is known to be at its cap, else given back at
    once, so no host sits on work another could start.
    """
    if free_slots <= 0:
        return 0
    return min(RECEIVE_MAX, free_slots + parked_last)


def may_hand_off(free_slots: int, queue_empty: bool = False) -> bool:
    """A settled job's slot goes to its tenant's parked work only while another stays free.

    The slot that stays free is for whatever the queue delivers next, so a
    tenant waiting in the queue (a quiet one) is started before a capped
    tenant's parked backlog takes every slot. Once a look at the queue found
    nothing another tenant could start (*queue_empty*: the look before a
    host's last free slot is promised, or the receive that pays the
    hand-offs owed), nobody waits there to be passed over, and even the last
    free slot may go.
    """
    return free_slots >= (1 if queue_empty else 2)


def own_first(notes: Sequence[T], mine, urgency=None) -> list[T]:
    """Order a tenant's parked notes for a hand-off: this host's oldest first, then the others'
    newest first.

    *notes* are the tenant's oldest notes, oldest first (one read of them).
    Each host takes its own parked jobs before another host's, oldest first
    (work stealing's local-queue-first), and takes another host's from the
    far end of its read (as a thief steals from the far end of a deque): the
    owner works up from the oldest of its notes while the thief works back
    from the newest of the read, so they seldom reach for the same note (a
    note another host took costs a refused transaction to find out). Order
    within a tenant's backlog is kept to within one read: the notes read are
    always the tenant's oldest, so none waits behind more than
    ``NOTES_READ`` later ones.
    """
    own = [note for note in notes if mine(note)]
    ordered = own + [note for note in reversed(notes) if not mine(note)]
    # Urgency outranks whose note it is: the above holds among equally urgent notes.
    return ordered if urgency is None else sorted(ordered, key=urgency)


def oldest_first(items: Sequence[T], submitted) -> list[T]:
    """Order a tenant's waiting work by first submission: its own jobs keep their order."""
    return sorted(items, key=submitted)


def retry_delay(retry_seconds: float, failures: int) -> float:
    """Backoff before a failed job runs again: ``retry_seconds * 2^(failures - 1)``."""
    return backoff.doubling(retry_seconds, failures - 1)


def is_dead(failures: int, max_attempts: int) -> bool:
    """A job whose counted failures reach the maximum is dead-lettered."""
    return failures >= max_attempts


def needs_hold(visible_until: float, now: float, heartbeat: float) -> bool:
    """An invisible message must be held now if it could show up again within two beats.

    Two heartbeats and 5 s of slack leave room for one failed beat; a message
    whose visibility runs longer than that (the receive's lease TTL covers
    most jobs) costs no visibility change at all.
    """
    return visible_until - now < 2 * heartbeat + 5


# -- fair shares of licence time (IMPOSER_SHARE_HALF_LIFE) ---------------------------------
#
# The anchors. Slurm's multifactor fair share decays each account's usage with a
# half-life (``PriorityDecayHalfLife``, default 7 days) and ranks it by
# ``F = 2^(-U/S)``: U the account's share of the decayed usage, S its normalised
# share of the shares. Kueue's admission fair sharing orders queues by usage
# decayed with ``usageHalfLifeTime``, weighted by each queue's ``weight``. AWS
# Batch's fair share scheduling decays usage over ``shareDecaySeconds`` and
# divides it by each share identifier's ``weightFactor``. Here U is a tenant's
# licence-seconds (what a pdfToolbox credit licence bills), S its weight's
# share of the slots, water-filled under the caps (a cap is never exceeded, so
# what a capped tenant cannot take goes to the others by weight); and since
# nothing is preempted, the rule decides only who gets the slot that is free now.

#: A tenant is held (``yields_to``) only when its usage over its share exceeds the least
#: used tenant's by more than this: 1.0 is a tenant's whole share.
SHARE_SLACK = 0.05


@attrs.frozen(kw_only=True)
class TenantShare:
    """What the share rule knows of one tenant with work running or waiting."""

    tenant: str
    #: Its weight (``imposer tenants set T --weight W``); 0 pauses it under fair share.
    weight: float = 1.0
    #: Its configured cap: fair share never lets it hold more.
    cap: int
    #: Slots it holds under its cap now.
    inflight: int = 0
    #: Its decayed licence-seconds now, running jobs' time so far included.
    usage: float = 0.0
    #: It has work waiting for a slot.
    waiting: bool = True


def weighted_shares(tenants: Sequence[TenantShare], slots: int) -> dict[str, float]:
    """Each tenant's share of the licence time: its weight's part, water-filled under caps.

    A tenant's share is its weight over the weights of the tenants active
    (running or waiting), but never more than its cap's part of the *slots*;
    what a capped tenant cannot use goes to the others by weight (Kueue's and
    DRF's max-min fairness with limits). Weight 0 or cap 0: a share of 0.
    """
    shares = {t.tenant: 0.0 for t in tenants}
    open_ = {t.tenant: t for t in tenants if t.weight > 0 and t.cap > 0}
    left = 1.0
    while open_ and left > 1e-12:
        weights = sum(t.weight for t in open_.values())
        limited = {name: t for name, t in open_.items()
                   if left * t.weight / weights >= t.cap / max(1, slots)}
        if not limited:
            for name, t in open_.items():
                shares[name] = left * t.weight / weights
            break
        for name, t in limited.items():
            shares[name] = min(1.0, t.cap / max(1, slots))
            left -= shares[name]
            del open_[name]
    return shares


def share_order(tenants: Sequence[TenantShare], slots: int) -> list[str]:
    """The waiting tenants that may take a slot, furthest below their share first.

    The rank is U/S, usage over share (Slurm's ``F = 2^(-U/S)`` ranks the
    same way); ties, as when nobody has used anything yet, go to the tenant
    holding the fewest slots for its share, then by name, so every host
    that reads the same figures decides the same. A tenant at its cap, of
    weight 0 or cap 0, or with nothing waiting, is not in it.
    """
    shares = weighted_shares(tenants, slots)
    able = [t for t in tenants
            if t.waiting and shares[t.tenant] > 0 and may_take_own_slot(t.inflight, t.cap)]
    return [t.tenant for t in sorted(able, key=lambda t: (
        t.usage / shares[t.tenant], t.inflight / shares[t.tenant], t.tenant))]


def next_tenant(tenants: Sequence[TenantShare], slots: int) -> str | None:
    """Which waiting tenant gets the slot free now: the one furthest below its weighted
    share of recent licence time (``share_order``), or None when nobody may take it.

    A tenant far above its share is thereby held below its cap while others
    wait; one waiting alone gets every slot its cap allows.
    """
    order = share_order(tenants, slots)
    return order[0] if order else None


def yields_to(tenant: str, tenants: Sequence[TenantShare], slots: int,
              slack: float = SHARE_SLACK) -> str | None:
    """The tenant *tenant* must leave a free slot to, or None if it may take it.

    Only a tenant *far* above its share is held: one whose fraction of the
    licence time, over its share, exceeds that of the tenant furthest below
    by more than *slack* (the order is ``share_order``'s). Within the slack
    the tenant in hand takes the slot: holding it costs a park and another
    start, and the shares come out within the slack all the same. A tenant
    that may not take a slot at all (at its cap, weight 0) yields to the
    first in the order, if anyone may (``may_start`` says whether it may).
    """
    order = share_order(tenants, slots)
    if not order or order[0] == tenant:
        return None
    if tenant not in order:
        return order[0]
    shares = weighted_shares(tenants, slots)
    total = sum(t.usage for t in tenants)
    if total <= 0:
        return None
    usage = {t.tenant: t.usage for t in tenants}
    ratio = {name: usage[name] / total / shares[name] for name in (tenant, order[0])}
    return order[0] if ratio[tenant] - ratio[order[0]] > slack else None


def may_start(tenant: str, tenants: Sequence[TenantShare], slots: int,
              slack: float = SHARE_SLACK) -> bool:
    """May *tenant* (among *tenants*, as waiting) take the free slot under fair share?"""
    return tenant in share_order(tenants, slots) and \
        yields_to(tenant, tenants, slots, slack) is None


def share_gaps(tenants: Sequence[TenantShare], slots: int) -> dict[str, float]:
    """Each tenant's usage fraction minus its share: above 0 it had more than its share."""
    shares = weighted_shares(tenants, slots)
    total = sum(t.usage for t in tenants)
    return {t.tenant: (t.usage / total if total > 0 else 0.0) - shares[t.tenant]
            for t in tenants}
