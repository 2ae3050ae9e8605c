"""The tenants this host found at their cap a moment ago: the cap memo.

A tenant whose acquire was refused at its cap is taken to be at that cap for
``policy.CAP_MEMO_SECONDS`` (or the deferral interval, if shorter) without a
transaction, unless one of its jobs ends here meanwhile: cycling a capped
backlog then costs half the calls. The dispatcher and a parked start record
what their acquires found; the refiller, the promise and the intake ask, and a
release here forgets the tenant (it may be below its cap again).
"""

from __future__ import annotations

from imposer.clock import Clock
from imposer.worker import policy


class CapMemo:
    """tenant -> (monotonic time until which it is taken to be at its cap, that cap)."""

    def __init__(self, defer_seconds: float, clock: Clock) -> None:
        #: How long a tenant found at its cap is taken to stay there.
        self.seconds = min(policy.CAP_MEMO_SECONDS, defer_seconds)
        self.clock = clock
        self._capped: dict[str, tuple[float, int]] = {}

    def found(self, tenant: str, cap: int) -> None:
        """*tenant* was found at its *cap* just now."""
        self._capped[tenant] = (self.clock.monotonic() + self.seconds, cap)

    def cap(self, tenant: str) -> int | None:
        """*tenant*'s cap if it was found at it within the memo's seconds, else None."""
        known = self._capped.get(tenant)
        return known[1] if known and known[0] > self.clock.monotonic() else None

    def freed(self, tenant: str) -> None:
        """A slot of *tenant* was freed here: it may be below its cap again."""
        self._capped.pop(tenant, None)
