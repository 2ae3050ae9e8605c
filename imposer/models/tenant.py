"""A tenant's row of the config table: its tier override, fair-share weight and webhook setup."""

from __future__ import annotations

from typing import Any

import attrs

from imposer.models.records import drop_none


@attrs.frozen(kw_only=True)
class TenantConfig:
    """A tenant's row of the config table: its tier override and webhook setup."""

    tenant_id: str
    #: Concurrency cap override; None means the default cap.
    cap: int | None = None
    #: Secret for signing completion webhooks (HMAC-SHA256).
    webhook_secret: str | None = None
    #: The secret being rotated out: deliveries carry its signature too until dropped.
    webhook_secret_previous: str | None = None
    #: Host names a webhook URL may point at.
    webhook_hosts: tuple[str, ...] = ()
    #: SQS sender ids that may send this tenant's jobs (``models.senders``); none
    #: binds nobody, and then IMPOSER_REQUIRE_SENDERS decides.
    senders: tuple[str, ...] = ()
    #: Fair-share weight (IMPOSER_SHARE_HALF_LIFE on); None means 1, 0 pauses the tenant.
    weight: float | None = None
    #: The express class (docs/priority.rst): with borrowing on, its parked jobs may
    #: borrow the reserve slots too.
    express: bool = False

    def to_item(self) -> dict[str, Any]:
        item = {
            "tenant_id": self.tenant_id,
            "cap": self.cap,
            "webhook_secret": self.webhook_secret,
            "webhook_secret_previous": self.webhook_secret_previous,
            "weight": self.weight,
            "express": True if self.express else None,
        }
        if self.webhook_hosts:
            item["webhook_hosts"] = list(self.webhook_hosts)
        if self.senders:
            item["senders"] = list(self.senders)
        return drop_none(item)

    @property
    def signing_secrets(self) -> tuple[str, ...]:
        """The secrets a delivery is signed with: the current one, then the previous."""
        return tuple(s for s in (self.webhook_secret, self.webhook_secret_previous) if s)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "TenantConfig":
        return cls(
            tenant_id=item["tenant_id"],
            cap=item.get("cap"),
            webhook_secret=item.get("webhook_secret"),
            webhook_secret_previous=item.get("webhook_secret_previous"),
            webhook_hosts=tuple(item.get("webhook_hosts") or ()),
            senders=tuple(item.get("senders") or ()),
            weight=float(item["weight"]) if item.get("weight") is not None else None,
            express=bool(item.get("express")),
        )
