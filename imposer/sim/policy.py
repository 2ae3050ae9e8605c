"""What one simulated variant is given: the fleet and the settings `imposer run` would have.

Not the worker's rules (those are ``imposer.worker.policy``, which the
simulator calls): the size of the fleet, the caps, and the windows and AWS
times that the rules play out in.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from imposer.errors import ConfigError


def _caps(value) -> tuple[tuple[str, int], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(t), int(c)) for t, c in items))


def _weights(value) -> tuple[tuple[str, float], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(t), float(w)) for t, w in items))


@attrs.frozen(kw_only=True)
class Policy:
    """One variant of the fleet and its settings, as `imposer run` would be configured."""

    hosts: int = 1
    #: Slots per host.
    slots: int = 8
    #: The default cap, and tier overrides (tenant, cap).
    cap: int = 4
    caps: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_caps)
    borrow: bool = False
    #: Slots per host never lent to borrowed work.
    reserve: int = 1
    #: Tenants of the express class: with borrowing on, they may borrow the reserve too.
    express: tuple[str, ...] = ()
    #: SQS fair-queue delivery by message group (layer 1); False is strict send order.
    fair_queues: bool = True
    #: How long a message at its tenant's cap stays invisible unless handed off.
    park_seconds: float = 300.0
    #: How long a paused tenant's message, or a licence retry, stays away.
    defer_seconds: float = 30.0
    retry_seconds: float = 60.0
    max_attempts: int = 3
    #: Seconds one AWS call takes the parent (0: instant), and one receive (SQS's is slower).
    call_seconds: float = 0.0
    receive_seconds: float = 0.0
    #: The receive's long poll while slots are free and nothing is visible (0: none).
    poll_seconds: float = 0.0
    #: The memo of tenants found at their cap (``CapMemo``).
    memo: bool = True
    #: How long a host keeps a tenant's cap before reading it again (IMPOSER_CAP_CACHE_SECONDS).
    cap_cache_seconds: float = 5.0
    #: How often a host reads who has work waiting (IMPOSER_REDRIVE_SECONDS): its next pass
    #: starts parked jobs no hand-off reached and, borrowing, lends idle slots
    #: (``allocation.ViewRead``); 0: never.
    redrive_seconds: float = 5.0
    #: Fair share of licence time (IMPOSER_SHARE_HALF_LIFE): the usage half-life in
    #: seconds; 0 is off (the count caps alone, as before).
    half_life: float = 0.0
    #: Tenants' weights under fair share (tenant, weight); the others weigh 1, 0 pauses.
    weights: tuple[tuple[str, float], ...] = attrs.field(default=(), converter=_weights)

    def __attrs_post_init__(self) -> None:
        if self.hosts < 1 or self.slots < 1:
            raise ConfigError("a simulated fleet needs at least one host of one slot")
        if self.cap < 0 or self.reserve < 0 or any(c < 0 for _, c in self.caps):
            raise ConfigError("caps and the reserve must not be negative")
        if min(self.park_seconds, self.defer_seconds, self.retry_seconds, self.call_seconds,
               self.receive_seconds, self.poll_seconds, self.cap_cache_seconds,
               self.half_life, self.redrive_seconds) < 0:
            raise ConfigError("delays must not be negative")
        if any(w < 0 or w != w for _, w in self.weights):
            raise ConfigError("weights must be 0 or more")
        if self.max_attempts < 1:
            raise ConfigError("max attempts must be at least 1")

    def cap_of(self, tenant: str) -> int:
        return dict(self.caps).get(tenant, self.cap)

    def weight_of(self, tenant: str) -> float:
        return dict(self.weights).get(tenant, 1.0)

    @property
    def sharing(self) -> bool:
        """Fair share of licence time decides who gets a free slot (a half-life is set)."""
        return self.half_life > 0

    @property
    def slots_total(self) -> int:
        return self.hosts * self.slots

    def perfect(self) -> Policy:
        """The same rules with instant delivery: no AWS time, no windows, no poll, no memo."""
        return attrs.evolve(self, park_seconds=0.0, defer_seconds=0.0, call_seconds=0.0,
                            receive_seconds=0.0, poll_seconds=0.0, memo=False)

    @property
    def label(self) -> str:
        lend = f"borrow (reserve {self.reserve})" if self.borrow else "no borrow"
        label = f"{self.hosts}x{self.slots} slots, cap {self.cap}, {lend}"
        if self.sharing:
            weights = ",".join(f"{t}={w:g}" for t, w in self.weights)
            label += f", share half-life {self.half_life:g}s" + \
                (f" weights {weights}" if weights else "")
        return label
