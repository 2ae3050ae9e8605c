"""The tenant config table: tier overrides (cap, fair-share weight), webhook settings, bound
senders.

A worker reads a tenant's row (its cap, its senders) at most once per
``IMPOSER_CAP_CACHE_SECONDS`` (5 s), so a change takes effect within seconds,
without a restart, and a busy tenant's acquires do not each cost a read.
"""

from __future__ import annotations

from imposer.aws.dynamodb import Dynamo
from imposer.aws.tables import TableSpec
from imposer.clock import Clock, SystemClock
from imposer.errors import ConfigError
from imposer.models import TenantConfig, valid_id


#: The largest fair-share weight: a million to one is already all or nothing.
MAX_WEIGHT = 1e6


def weight_problem(weight: float | None) -> str | None:
    """Say what is wrong with a fair-share weight, or None: a number from 0 (pauses) up."""
    if weight is None:
        return None
    if not isinstance(weight, (int, float)) or not 0 <= weight <= MAX_WEIGHT:
        return f"weight must be a number from 0 (pauses the tenant) to {MAX_WEIGHT:g}, " \
               f"got {str(weight)[:40]}"
    return None


def table_spec(name: str) -> TableSpec:
    return TableSpec(name=name, hash_key="tenant_id")


class TenantStore:
    """Read and write tenants' rows."""

    def __init__(self, dynamo: Dynamo, table: str, default_cap: int,
                 cache_seconds: float = 0.0, clock: Clock | None = None) -> None:
        self.dynamo = dynamo
        self.table = table
        self.default_cap = default_cap
        self.cache_seconds = cache_seconds
        self.clock = clock or SystemClock()
        #: tenant -> (monotonic time the row was read, the row or None)
        self._caps: dict[str, tuple[float, TenantConfig | None]] = {}

    def get(self, tenant_id: str) -> TenantConfig | None:
        item = self.dynamo.get(self.table, {"tenant_id": tenant_id})
        return TenantConfig.from_item(item) if item else None

    def cap_for(self, tenant_id: str) -> int:
        """Return the tenant's tier override, else the default cap (cached briefly)."""
        config = self._cached(tenant_id)
        return self.default_cap if config is None or config.cap is None else config.cap

    def weight_for(self, tenant_id: str) -> float:
        """Return the tenant's fair-share weight, 1 without one (cached like the cap)."""
        config = self._cached(tenant_id)
        return 1.0 if config is None or config.weight is None else config.weight

    def senders_for(self, tenant_id: str) -> tuple[str, ...]:
        """Return the sender ids bound to the tenant, () for none (cached like the cap)."""
        config = self._cached(tenant_id)
        return config.senders if config else ()

    def _cached(self, tenant_id: str) -> TenantConfig | None:
        now = self.clock.monotonic()
        known = self._caps.get(tenant_id)
        if known is not None and now - known[0] < self.cache_seconds:
            return known[1]
        config = self.get(tenant_id)
        if self.cache_seconds > 0:
            if len(self._caps) >= 10_000:
                self._caps.clear()
            self._caps[tenant_id] = (now, config)
        return config

    def caps(self) -> dict[str, int]:
        """Return every tier override, tenant -> cap; tenants not in it have the default."""
        return {c.tenant_id: c.cap for c in self.list() if c.cap is not None}

    def put(self, config: TenantConfig) -> None:
        if not valid_id(config.tenant_id):
            raise ConfigError(f"invalid tenant id {config.tenant_id!r}")
        if config.cap is not None and config.cap < 0:
            raise ConfigError("cap must be 0 or more")
        problem = weight_problem(config.weight)
        if problem:
            raise ConfigError(problem)
        self.dynamo.put(self.table, config.to_item())
        self._caps.pop(config.tenant_id, None)

    def list(self) -> list[TenantConfig]:
        items = self.dynamo.scan(self.table)
        return sorted((TenantConfig.from_item(i) for i in items), key=lambda c: c.tenant_id)
