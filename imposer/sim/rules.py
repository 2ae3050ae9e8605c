"""The worker's decisions the simulator calls, as one value a run is given.

By default (``WORKER``) they are ``imposer.worker.policy``'s own functions,
so a simulation cannot drift from `imposer run`. A study of another rule,
or a test proving that the simulator really decides with them, passes
``simulate`` a ``Rules`` with one of them replaced
(``attrs.evolve(WORKER, may_hand_off=...)``): the simulator is given the
rule, nothing is patched.
"""

from __future__ import annotations

from typing import Callable

import attrs

from imposer.worker import policy


@attrs.frozen(kw_only=True)
class Rules:
    """One function per decision; each field's default is the worker's."""

    #: The cap: may a tenant holding *inflight* of *cap* slots start one more?
    may_take_own_slot: Callable = policy.may_take_own_slot
    #: Why a tenant at its cap may not borrow an idle slot now (None: it may).
    why_not_borrow: Callable = policy.why_not_borrow
    #: Which capped tenants' parked jobs the idle slots beyond the reserve are lent to.
    borrow_turns: Callable = policy.borrow_turns
    #: Is a freed slot handed to the tenant's parked job now, or owed to it?
    may_hand_off: Callable = policy.may_hand_off
    #: How many messages a receive asks for.
    receive_size: Callable = policy.receive_size
    #: The order of a tenant's parked notes a hand-off takes them in.
    own_first: Callable = policy.own_first
    #: Send order.
    oldest_first: Callable = policy.oldest_first
    #: The delay before a failed job is tried again.
    retry_delay: Callable = policy.retry_delay
    #: Has a job failed often enough to be dead-lettered?
    is_dead: Callable = policy.is_dead
    #: Fair share: a tenant's decayed usage now, a release's charge, and its fold into
    #: the terms; who may start and who of the waiting gets a free slot.
    usage_at: Callable = policy.usage_at
    forward_charge: Callable = policy.forward_charge
    fold: Callable = policy.fold
    #: What a tenant's running jobs count for now, and its typical run after one ends.
    running_usage: Callable = policy.running_usage
    typical_run: Callable = policy.typical_run
    may_start: Callable = policy.may_start
    next_tenant: Callable = policy.next_tenant


#: The worker's own rules: what every simulation decides with unless told otherwise.
WORKER = Rules()
