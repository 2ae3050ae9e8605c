"""The tenant config table: tier overrides (cap) and webhook settings.

Read on every acquire, so a change takes effect on the next job without a
restart.
"""

from __future__ import annotations

from imposer.aws.dynamodb import Dynamo
from imposer.aws.tables import TableSpec
from imposer.errors import ConfigError
from imposer.models import TenantConfig, valid_id


def table_spec(name: str) -> TableSpec:
    return TableSpec(name=name, hash_key="tenant_id")


class TenantStore:
    """Read and write tenants' rows."""

    def __init__(self, dynamo: Dynamo, table: str, default_cap: int) -> None:
        self.dynamo = dynamo
        self.table = table
        self.default_cap = default_cap

    def get(self, tenant_id: str) -> TenantConfig | None:
        item = self.dynamo.get(self.table, {"tenant_id": tenant_id})
        return TenantConfig.from_item(item) if item else None

    def cap_for(self, tenant_id: str) -> int:
        """Return the tenant's tier override, else the default cap."""
        config = self.get(tenant_id)
        if config is None or config.cap is None:
            return self.default_cap
        return config.cap

    def caps(self) -> dict[str, int]:
        """Return every tier override, tenant -> cap; tenants not in it have the default."""
        return {c.tenant_id: c.cap for c in self.list() if c.cap is not None}

    def put(self, config: TenantConfig) -> None:
        if not valid_id(config.tenant_id):
            raise ConfigError(f"invalid tenant id {config.tenant_id!r}")
        if config.cap is not None and config.cap < 0:
            raise ConfigError("cap must be 0 or more")
        self.dynamo.put(self.table, config.to_item())

    def list(self) -> list[TenantConfig]:
        items = self.dynamo.scan(self.table)
        return sorted((TenantConfig.from_item(i) for i in items), key=lambda c: c.tenant_id)
