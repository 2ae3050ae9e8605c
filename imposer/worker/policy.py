"""The dispatch policy's decisions, as pure functions: the worker and the simulator share them.

Everything here is arithmetic on counts and times, with no AWS and no
clock, so ``imposer simulate`` replays imposer's own rules in virtual time
and cannot drift from what `imposer run` does. The worker's modules call
these; the transactions that enforce them live in ``imposer.state.leases``.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence, TypeVar

T = TypeVar("T")

#: A tenant's oldest parked notes one read takes (one waiting-table Query). The hand-offs
#: after it take the next of them, so one read serves up to this many (its capacity units
#: are spent once); and the wider it is, the later hosts stealing from each other meet.
NOTES_READ = 32
#: Messages one receive returns at most (SQS's limit).
RECEIVE_MAX = 10


def may_take_own_slot(inflight: int, cap: int) -> bool:
    """The cap (layer 2): a tenant may start a job while it holds fewer than its cap.

    A cap of 0 pauses the tenant. The acquire transaction's condition is this
    rule, evaluated atomically in DynamoDB.
    """
    return cap > 0 and inflight < cap


def why_not_borrow(enabled: bool, free_slots: int, reserve: int, tenant: str,
                   blockers: Iterable[str]) -> str | None:
    """Say why a tenant at its cap may not borrow an idle slot now, or None if it may.

    Borrowed work never leaves fewer than *reserve* slots of a host free, and
    nobody borrows while another tenant below its cap has work waiting.
    """
    if not enabled:
        return "borrowing is off"
    if free_slots <= reserve:
        return f"only {free_slots} slot(s) free; {reserve} kept in reserve"
    others = sorted(set(blockers) - {tenant})
    if others:
        return f"tenants below their cap are waiting: {', '.join(others)}"
    return None


def borrow_turns(enabled: bool, free_slots: int, reserve: int, borrowers: Mapping[str, int],
                 blockers: Iterable[str]) -> list[str]:
    """Which capped tenants' parked jobs this host's idle slots go to now, one per slot.

    *borrowers* are tenants at their cap with parked work, each with the
    slots it borrows already. Every turn obeys ``why_not_borrow`` as the
    free slots run down (so the reserve stays free and nobody borrows while
    a tenant below its cap waits), and goes to the tenant that borrows
    fewest so far (ties by name), so two capped tenants share the idle
    slots rather than the first taking them all. The caller claims one of
    the tenant's parked notes per turn, in the acquire transaction.
    """
    held, turns = dict(borrowers), []
    blockers = frozenset(blockers)
    for taken in range(max(0, free_slots - reserve)):
        allowed = [t for t in held
                   if why_not_borrow(enabled, free_slots - taken, reserve, t, blockers) is None]
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


def own_first(notes: Sequence[T], mine) -> list[T]:
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
    return own + [note for note in reversed(notes) if not mine(note)]


def oldest_first(items: Sequence[T], submitted) -> list[T]:
    """Order a tenant's waiting work by first submission: its own jobs keep their order."""
    return sorted(items, key=submitted)


def retry_delay(retry_seconds: float, failures: int) -> float:
    """Backoff before a failed job runs again: ``retry_seconds * 2^(failures - 1)``."""
    return retry_seconds * 2 ** max(0, failures - 1)


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
