"""The slot decision's words: what a read found, what a step does, what triggered it.

``allocation.decide`` takes a trigger and answers a ``Step``; these are its plain
values, kept apart so the decision's module holds only the decision.
"""

from __future__ import annotations

import enum
from typing import Union

import attrs


class Read(enum.Enum):
    """What a read of a tenant's parked notes found (``Standing.reads``)."""

    #: A note still parked: its job can start.
    PARKED = "parked"
    #: None left.
    NONE = "none"
    #: The tenant is paused (cap 0): its notes were not read.
    PAUSED = "paused"
    #: The read failed (an AWS error): the parked job waits for a later turn.
    FAILED = "failed"


class Kind(enum.Enum):
    """What to do next with a free slot."""

    #: Read the tenant's cap and oldest parked notes (``Step.tenant``), then ask again.
    READ = "read"
    #: Look at the queue without waiting, then ask again (``Standing.looked``).
    LOOK = "look"
    #: The release starts the tenant's oldest parked job in the slot it frees.
    HAND_OVER = "hand over"
    #: The release is a plain one, and the slot is decided again after it (``Released``).
    LEAVE = "leave"
    #: The release is a plain one; the tenant has nothing parked, so nothing follows it.
    NOTHING_PARKED = "nothing parked"
    #: Start the tenant's oldest parked job in a free slot (an acquire of its own).
    START = "start"
    #: No slot may go to the tenant now: the next receive that finds the queue empty pays.
    OWE = "owe"
    #: A hand-off owed is dropped (the rule says no even with the queue empty).
    FORGIVE = "forgive"


@attrs.frozen
class Step:
    """One thing to do with a free slot (``decide``'s answer)."""

    kind: Kind
    tenant: str | None = None
    #: The start takes a borrowed slot (the tenant is at its cap).
    borrow: bool = False


@attrs.frozen
class Releasing:
    """A finished job of *tenant* is about to be released: may its release hand over?"""

    tenant: str
    #: The job held a borrowed slot.
    borrowed: bool = False


@attrs.frozen
class Released:
    """A job of *tenant* was released with no hand-over: its slot is free."""

    tenant: str
    borrowed: bool = False


@attrs.frozen
class QueueEmpty:
    """A receive found nothing this host could start (the hand-offs owed are paid)."""


@attrs.frozen
class BatchDone:
    """A receive's batch was dispatched: fair share may fill the slots still free."""


@attrs.frozen
class ViewRead:
    """A new read of the waiting view: parked jobs no hand-off reached may start."""

    #: The last receive found the queue empty (the host's last slot may then go, after
    #: a look finds nobody has sent since).
    queue_empty: bool = False


Trigger = Union[Releasing, Released, QueueEmpty, BatchDone, ViewRead]
