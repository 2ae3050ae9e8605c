"""What the leases table holds now, read; and a counter that disagrees with it, repaired.

The table's three kinds of item (``leases``) are read here: every live lease,
each tenant's counter, each tenant's usage under fair share. The table holds
only live work and one item per tenant, so these Scans stay small however
long the service has run. ``repair`` is the one write: it sets a counter
back to its live leases, and is safe while other hosts acquire and release.
"""

from __future__ import annotations

import collections
import logging

from imposer.aws.dynamodb import Dynamo
from imposer.logs import extra
from imposer.models import Lease, TenantCounter, counter_key
from imposer.state.lease_items import usage_terms

logger = logging.getLogger(__name__)


class LeaseBook:
    """Read the live leases, counters and usage of one leases table; repair its counters."""

    def __init__(self, dynamo: Dynamo, table: str) -> None:
        self.dynamo = dynamo
        self.table = table

    def leases(self) -> list[Lease]:
        """Return every live lease (the table holds only live work and tenants' counters)."""
        found = []
        for item in self.dynamo.scan(self.table, "begins_with(pk, :p)", {":p": "lease#"}):
            try:
                found.append(Lease.from_item(item))
            except (KeyError, TypeError, ValueError):
                logger.error("ignoring a malformed lease item %s", item.get("pk"),
                             extra=extra("lease_malformed"))
        return sorted(found, key=lambda lease: (lease.tenant_id, lease.acquired_at))

    def counters(self) -> dict[str, TenantCounter]:
        items = self.dynamo.scan(self.table, "begins_with(pk, :p)", {":p": "counter#"})
        return {i["tenant_id"]: TenantCounter.from_item(i) for i in items}

    def usage(self) -> dict[str, dict[int, float]]:
        """Every tenant's forward-decayed usage terms (one small item per tenant that ran
        under fair share), tenant -> era -> amount."""
        items = self.dynamo.scan(self.table, "begins_with(pk, :p)", {":p": "usage#"})
        return {i["tenant_id"]: usage_terms(i) for i in items if "tenant_id" in i}

    def repair(self, tenant: str | None = None) -> dict[str, tuple[int, int]]:
        """Set counters that disagree with their live leases; return {tenant: (was, now)}.

        Counters are read before leases, and each fix is conditioned on the
        counter's ``ver`` being unchanged, so a concurrent acquire or release
        makes the fix a no-op instead of a corruption. Own (capped) and
        borrowed leases are counted apart; the figures returned are their sums.
        """
        counters = {t: c for t, c in self.counters().items() if tenant in (None, t)}
        live = collections.Counter((lease.tenant_id, lease.borrowed) for lease in self.leases())
        fixed = {}
        for name, counter in counters.items():
            own, lent = live[(name, False)], live[(name, True)]
            have_own, have_lent = counter.inflight, counter.borrowed
            if (own, lent) == (have_own, have_lent):
                continue
            ok = self.dynamo.update(
                self.table, {"pk": counter_key(name)},
                "SET inflight = :n, borrowed = :b ADD ver :one",
                values={":n": own, ":b": lent, ":one": 1, ":v": counter.ver},
                condition="ver = :v")
            if ok:
                fixed[name] = (have_own + have_lent, own + lent)
                logger.warning("repaired counter of %s: %s+%s borrowed -> %s+%s", name, have_own,
                               have_lent, own, lent, extra=extra("counter_repaired", name))
        return fixed
