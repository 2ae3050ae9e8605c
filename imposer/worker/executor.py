"""The slot decision carried out: one loop for every trigger, whoever runs it.

``allocation.decide`` says what to do next with a free slot; this module asks it
again and again and keeps what each step leaves (the reads, the looks, the tenants
tried, the starts, the borrowers lent to, the hand-offs owed) until it says no more.
What a step does to the world is the caller's: the worker carries it out against
SQS and DynamoDB (``Promiser.promise``, ``Refiller.allocate``), the simulator
on its virtual fleet (``imposer.sim.handoff``). So both run this code, and a
change to how a freed slot is handed on is made once.

Each plan is a generator. It yields every step it takes, and the caller sends
back what the steps that need the world found (``READ``: a ``Read``; ``LOOK``:
True if the look found nothing another tenant could start; ``START``: True if a
job started; ``OWE`` and ``FORGIVE`` are the plan's own, answered None); it
returns its outcome. ``run`` drives a plan for a caller that answers at once;
``carried`` for the simulator, which answers in virtual time from generators of
its own.
"""

from __future__ import annotations

from typing import Any, Callable, Generator, Mapping, Protocol

import attrs

from imposer.worker.allocation import POLICY, Rules, Standing, decide
from imposer.worker.steps import Kind, QueueEmpty, Read, Releasing, Step, Trigger

#: A plan: yields the steps to carry out, is sent what each did, returns its outcome.
Plan = Generator[Step, Any, Any]


@attrs.define
class Progress:
    """What the steps of one trigger have found so far (the standing's moving part)."""

    #: tenant -> what a read of its notes found.
    reads: dict[str, Read] = attrs.Factory(dict)
    #: tenant -> whether a look at the queue found nothing another tenant could start.
    looked: dict[str, bool] = attrs.Factory(dict)
    #: Tenants tried with nothing started (or owed the slot instead).
    tried: set[str] = attrs.Factory(set)
    started: int = 0  #: jobs started so far
    #: The borrow rule's candidates, each with the slots it borrows now.
    borrowers: dict[str, int] = attrs.Factory(dict)


class Parent(Protocol):
    """What a plan for the free slots needs of the parent that carries it out."""

    #: This host's slots: the most hand-offs owed to one tenant.
    slots: int
    #: tenant -> hand-offs owed to it, oldest first (the plan pays and adds to it).
    owed: dict[str, int]

    def standing(self, trigger: Trigger, progress: Progress) -> Standing:
        """What the decision needs now, read from the parent's parts (no AWS call)."""

    def borrowers(self, prefer: tuple[str, ...]) -> dict[str, int]:
        """The borrow rule's candidates, *prefer* first, each with the slots it borrows."""


def releasing(trigger: Releasing, standing: Callable[[Progress], Standing],
              borrowers: Mapping[str, int], rules: Rules = POLICY) -> Plan:
    """Before a release: read and look as the decision asks; return its last step.

    The last step is ``HAND_OVER`` (the release starts that job in its slot),
    ``NOTHING_PARKED`` or ``LEAVE`` (a plain release; ``allocate`` with
    ``Released`` decides after it). *borrowers*: for a borrowed job's slot.
    """
    progress = Progress(borrowers=dict(borrowers))
    while True:
        step = decide(standing(progress), trigger, rules)
        if step.kind is Kind.READ:
            progress.reads[step.tenant] = yield step
        elif step.kind is Kind.LOOK:
            progress.looked[step.tenant] = yield step
        else:
            return step


def allocate(trigger: Trigger, parent: Parent, *, prefer: tuple[str, ...] = (),
             rules: Rules = POLICY) -> Plan:
    """Give the free slots under *trigger* as the decision says; return how many started.

    *prefer*: a tenant whose borrowed job just ended here (first among the
    borrowers). A hand-off is owed (``OWE``) when the decision gives a slot
    to nobody now; an empty receive (``QueueEmpty``) pays what is owed, and a
    tenant whose paid start found nothing is owed no more.
    """
    progress, owed = Progress(), parent.owed
    lent: dict[str, int] | None = None  # the borrowers, once the first turn is taken
    while True:
        progress.borrowers = lent if lent is not None else parent.borrowers(prefer)
        step = decide(parent.standing(trigger, progress), trigger, rules)
        if step is None:
            return progress.started
        tenant = step.tenant or ""
        if step.kind is Kind.LOOK:
            progress.looked[tenant] = yield step
            continue
        if step.kind is Kind.OWE:
            owed[tenant] = min(parent.slots, owed.get(tenant, 0) + 1)
            progress.tried.add(tenant)
            yield step
            continue
        if step.kind is Kind.FORGIVE:
            owed.pop(tenant, None)
            yield step
            continue
        if step.borrow and lent is None:
            lent = dict(progress.borrowers)
        paying = isinstance(trigger, QueueEmpty) and not step.borrow
        if paying:
            owed[tenant] -= 1
        if (yield step):
            progress.started += 1
            if lent is not None and step.borrow:
                lent[tenant] += 1
        else:
            progress.tried.add(tenant)
            if lent is not None and step.borrow:
                lent.pop(tenant, None)
            if paying:
                owed.pop(tenant, None)
        if paying and not owed.get(tenant):
            owed.pop(tenant, None)


def carried(plan: Plan, carry: Callable[[Step], Generator[Any, Any, Any]]) -> Generator:
    """Drive *plan*, each step carried out by the generator ``carry(step)`` returns (the
    simulator's, which yields while virtual time passes); return the plan's outcome."""
    answer, error = None, None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(answer)
        except StopIteration as end:
            return end.value
        error = None
        try:
            answer = yield from carry(step)
        except Exception as exc:  # raised in the plan, at its step: its own guards see it
            error = exc


def run(plan: Plan, carry: Callable[[Step], Any]) -> Any:
    """Drive *plan*, carrying out each step it yields with *carry* at once; return its
    outcome."""
    def at_once(step: Step):
        return carry(step)
        yield  # (a generator that never waits)

    try:
        next(carried(plan, at_once))
    except StopIteration as end:
        return end.value
    raise AssertionError("a step carried out at once waited")  # pragma: no cover
