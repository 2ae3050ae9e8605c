"""Who gets a free slot of this host: one decision, whatever freed or found the slot.

A release frees a slot; a receive that brought nothing, the end of a receive's batch
or a read of the waiting view finds slots free. Each is a *trigger*: ``decide`` takes
it with a ``Standing`` (what the parent knows now, as plain values) and returns the
next ``Step``, or None when nothing more is to be done. ``executor`` asks it again
and again, folding what each step found into the next standing (notes read, a look
at the queue, a start that failed); the caller (``Settler`` before a release,
``Refiller`` for the rest) carries each step out against SQS and DynamoDB. The
simulator runs the same executor on its virtual fleet (``imposer.sim.handoff``). The
rules are ``policy``'s (``may_hand_off``, ``borrow_turns``, ``own_first``); fair
share's answers are computed by ``SharePolicy``.
A step names a tenant from counts alone, so a job's urgency never moves a slot between
tenants; which of the tenant's waiting jobs then takes it is ``in_turn``'s.

One branch per trigger (docs/design.rst, "A freed slot"):

* ``Releasing`` (``_releasing``): the release itself starts the tenant's oldest parked
  job (``HAND_OVER``) while another slot stays free, or, for the host's last, after a
  ``LOOK`` found no other tenant's work; a borrowed slot to the job the borrow rule
  lends it to. ``READ`` comes first; else a plain release (``LEAVE``,
  ``NOTHING_PARKED``).
* ``Released`` (``_released``): a parked job ``START``s in the slot, or it is
  ``OWE``d (the host's last); a borrowed job's slot is lent again.
* ``QueueEmpty`` (``_owed``, ``_lend``): the hand-offs owed are paid, then idle slots lent.
* ``BatchDone`` (``_share_fill``): fair share fills what is still free.
* ``ViewRead`` (``_restart_parked``, ``_lend``): parked jobs no hand-off reached start (the last
  slot only after a ``LOOK``), then idle slots are lent.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence, TypeVar

import attrs

from imposer.worker import policy
from imposer.worker.steps import (  # noqa: F401 (the decision's words, imported from here)
    BatchDone,
    Kind,
    QueueEmpty,
    Read,
    Released,
    Releasing,
    Step,
    Trigger,
    ViewRead,
)

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class Standing:
    """What the parent knows when it decides, as plain values (built anew for each
    ``decide``: the free slots, the reads and the share rule's answers move)."""

    free: int  #: free slots of this host now
    stopping: bool = False  #: the worker is stopping: nothing more starts
    #: Tenants this host parked or read notes of lately (``HandOff.parked_tenants``).
    parked: tuple[str, ...] = ()
    #: Tenants found at their cap less than a second ago (``CapMemo``).
    capped: frozenset[str] = frozenset()
    #: tenant -> hand-offs owed to it, oldest first.
    owed: Mapping[str, int] = attrs.field(factory=dict)
    #: tenant -> what a read of its notes for this trigger found.
    reads: Mapping[str, Read] = attrs.field(factory=dict)
    #: tenant -> whether a look at the queue for it found nothing another tenant could start.
    looked: Mapping[str, bool] = attrs.field(factory=dict)
    #: Tenants tried for this trigger with nothing started (no note, refused, failed, or
    #: owed the slot instead).
    tried: frozenset[str] = frozenset()
    started: int = 0  #: starts made for this trigger so far
    borrow: bool = False  #: borrowing (``IMPOSER_BORROW``) is on
    reserve: int = 1  #: slots borrowing leaves free
    #: Tenants of the express class: their borrowed jobs may take the reserve too.
    express: frozenset[str] = frozenset()
    #: Tenants below their cap with work waiting: nobody borrows while one does.
    blockers: frozenset[str] = frozenset()
    #: Capped tenants whose parked jobs may borrow -> the slots each borrows now (a
    #: borrower whose turn started nothing is dropped for the rest of the trigger).
    borrowers: Mapping[str, int] = attrs.field(factory=dict)
    #: Tenants below their cap with queued work, as the waiting view read them (in order).
    below_cap: tuple[str, ...] = ()
    sharing: bool = False  #: fair share (IMPOSER_SHARE_HALF_LIFE) is on
    #: Fair share: the tenant the trigger's tenant leaves the slot to (None: it may take it).
    yields_to: str | None = None
    #: Fair share: the parked tenant a free slot goes to now, those ``tried`` passed over.
    choice: str | None = None


@attrs.frozen(kw_only=True)
class Rules:
    """The rules of ``policy`` the decision applies (the simulator may pass others)."""

    may_hand_off: Callable[..., bool] = policy.may_hand_off
    borrow_turns: Callable[..., list[str]] = policy.borrow_turns
    own_first: Callable[..., list] = policy.own_first


#: The worker's own rules.
POLICY = Rules()


def decide(standing: Standing, trigger: Trigger, rules: Rules = POLICY) -> Step | None:
    """The next step for a free slot under *trigger*, or None: nothing more to do.

    *rules*: ``policy``'s own unless a study of another rule passes its own (any
    value with ``may_hand_off`` and ``borrow_turns``, such as ``imposer.sim.rules``').
    """
    if isinstance(trigger, Releasing):
        return _releasing(standing, trigger, rules)
    if standing.stopping:
        return None
    if isinstance(trigger, Released):
        return _released(standing, trigger, rules)
    if isinstance(trigger, QueueEmpty):
        return _owed(standing, rules) or _lend(standing, rules)
    if isinstance(trigger, BatchDone):
        return _share_fill(standing)
    if isinstance(trigger, ViewRead):
        return _restart_parked(standing, trigger, rules) or _lend(standing, rules)
    raise TypeError(f"not a trigger: {trigger!r}")


def in_turn(notes: Sequence[T], mine: Callable[[T], bool], urgency: Callable[[T], Any],
            rules: Rules = POLICY) -> list[T]:
    """Order the waiting jobs of the tenant a step names: the one its slot goes to first.

    Whatever gave the tenant the slot (a hand-over, a start, a borrowed turn), it goes
    to the tenant's most urgent job (*urgency*: ``urgency.sort_key``'s order, priority
    then due time), the oldest among equals, this host's own first (``own_first``).
    """
    return rules.own_first(notes, mine, urgency=urgency)


def _releasing(s: Standing, t: Releasing, rules: Rules) -> Step:
    """Before the release: hand the slot over with it, or leave it to the release."""
    if s.stopping:
        return Step(Kind.LEAVE)
    if t.borrowed:
        return _lent_with_release(s, rules)
    last = not rules.may_hand_off(s.free)  # the slot is for the queue, unless a look...
    read = s.reads.get(t.tenant)
    if read is None:
        if last and (not rules.may_hand_off(s.free, True) or t.tenant not in s.parked):
            return Step(Kind.LEAVE)  # (no read for a tenant not parked here lately)
        return Step(Kind.READ, t.tenant)
    if read in (Read.FAILED, Read.PAUSED) or s.yields_to is not None:
        return Step(Kind.LEAVE)  # (fair share: after the release, whom it goes to)
    if read is Read.NONE:
        return Step(Kind.NOTHING_PARKED, t.tenant)
    if last:
        looked = s.looked.get(t.tenant)
        if looked is None:
            return Step(Kind.LOOK, t.tenant)
        if not rules.may_hand_off(s.free, queue_empty=looked):
            return Step(Kind.LEAVE)  # the queue has work for the slot: it takes it
    return Step(Kind.HAND_OVER, t.tenant)


def _lent_with_release(s: Standing, rules: Rules) -> Step:
    """A borrowed job's slot: to the parked job the borrow rule lends it to, with the
    release; a turn whose tenant has nothing parked passes to the next."""
    if not s.borrow:
        return Step(Kind.LEAVE)
    passed = {t for t, r in s.reads.items() if r in (Read.NONE, Read.PAUSED)}
    turns = rules.borrow_turns(s.borrow, s.free, s.reserve,
                                {t: n for t, n in s.borrowers.items() if t not in passed},
                                s.blockers, s.express)
    if not turns:
        return Step(Kind.NOTHING_PARKED) if passed else Step(Kind.LEAVE)
    read = s.reads.get(turns[0])
    if read is None:
        return Step(Kind.READ, turns[0])
    if read is Read.FAILED:
        return Step(Kind.LEAVE)
    return Step(Kind.HAND_OVER, turns[0], borrow=True)


def _released(s: Standing, t: Released, rules: Rules) -> Step | None:
    """After a plain release: one parked job takes the slot, or is owed it."""
    if t.borrowed:
        return _lend(s, rules)
    if s.started or s.tried:
        return None  # one settled job hands over one slot
    tenant = s.choice if s.sharing else t.tenant  # (fair share: the one furthest below)
    if tenant is None:
        return None  # nobody waits parked: the slot is the queue's
    if rules.may_hand_off(s.free):
        return Step(Kind.START, tenant)
    return Step(Kind.OWE, tenant)


def _owed(s: Standing, rules: Rules) -> Step | None:
    """The queue had nothing for the free slots: pay the hand-offs owed, oldest first."""
    for tenant, count in s.owed.items():
        if count <= 0:
            continue
        if not rules.may_hand_off(s.free, queue_empty=True):
            if s.free:  # the rule says no even now: nothing to wait for
                return Step(Kind.FORGIVE, tenant)
            continue
        return Step(Kind.START, tenant)
    return None


def _lend(s: Standing, rules: Rules) -> Step | None:
    """Borrowing: an idle slot beyond the reserve to a capped tenant's parked job."""
    if not s.borrow or not s.free:
        return None
    turns = rules.borrow_turns(s.borrow, s.free, s.reserve, s.borrowers, s.blockers, s.express)
    return Step(Kind.START, turns[0], borrow=True) if turns else None


def _share_fill(s: Standing) -> Step | None:
    """Fair share: a free slot to the parked work of the tenant furthest below its share."""
    if not s.sharing or not s.free or s.choice is None:
        return None
    return Step(Kind.START, s.choice)


def _restart_parked(s: Standing, t: ViewRead, rules: Rules) -> Step | None:
    """Parked jobs of tenants below their cap that no hand-off reached, within the cap;
    the host's last free slot only if the last receive found the queue empty and a look
    now finds nobody that sent since."""
    for tenant in s.below_cap:
        if tenant in s.tried:
            continue
        if not s.free:
            return None
        if not rules.may_hand_off(s.free):
            if not t.queue_empty:
                continue
            looked = s.looked.get(tenant)
            if looked is None:
                return Step(Kind.LOOK, tenant)
            if not rules.may_hand_off(s.free, queue_empty=looked):
                continue
        if tenant in s.capped:
            continue
        return Step(Kind.START, tenant)
    return None
