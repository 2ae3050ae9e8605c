"""Whether the principal that sent a message may send for the tenant it names.

The body's ``tenant_id`` and the group id are the sender's own words; SQS's
``SenderId`` is not. A tenant's row binds the senders that may act for it
(``imposer tenants set --sender``). Three more kinds of sender pass:

* trusted senders (``IMPOSER_TRUSTED_SENDERS``): a front door that stamps
  the tenant after authenticating the caller itself, or worker hosts under
  another principal;
* this worker's own principal (any session of its role), which re-publishes
  deferred messages it has already vetted;
* anyone, for a tenant with no bound sender, unless ``IMPOSER_REQUIRE_SENDERS``
  is on: a deployment that binds nobody keeps working as before.

Our own principal is asked of STS once, and only when a message would
otherwise be refused, so a deployment without bindings never asks.
"""

from __future__ import annotations

from typing import Callable

from imposer.errors import ConfigError, SenderRefused
from imposer.models.senders import parse_senders, sender_matches
from imposer.state.tenants import TenantStore


class SenderCheck:
    """Refuse a message whose sender is not bound to its tenant (see the module doc)."""

    def __init__(self, tenants: TenantStore, *, trusted: str, require: bool,
                 whoami: Callable[[], str]) -> None:
        try:
            self.trusted = parse_senders(trusted)
        except ValueError as exc:
            raise ConfigError(f"IMPOSER_TRUSTED_SENDERS: {exc}") from None
        self.tenants, self.require, self.whoami = tenants, require, whoami
        self._own: tuple[str, ...] | None = None

    def check(self, tenant_id: str, sender_id: str | None) -> None:
        """Return if *sender_id* may send for *tenant_id*; raise SenderRefused if not."""
        bound = self.tenants.senders_for(tenant_id)
        if sender_matches(bound, sender_id) or (not bound and not self.require):
            return
        if sender_matches(self.trusted + self.own(), sender_id):
            return
        if bound:
            raise SenderRefused(f"sender {sender_id or '(none)'} is not bound to tenant "
                                f"{tenant_id!r} (imposer tenants set --sender)")
        raise SenderRefused(f"tenant {tenant_id!r} has no bound sender and "
                            f"IMPOSER_REQUIRE_SENDERS is on; sender {sender_id or '(none)'} "
                            "is not trusted")

    def own(self) -> tuple[str, ...]:
        """This worker's sender entry: its user id, or its role id (every host's session)."""
        if self._own is None:
            self._own = (self.whoami().split(":", 1)[0],)
        return self._own
