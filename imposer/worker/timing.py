"""The one owner of how the parent spends a lease TTL.

A lease lasts ``IMPOSER_LEASE_TTL_SECONDS`` from its last renewal, and the
parent measures everything that must end before another host may take the
job against it: a message is received and held invisible for a TTL, so after
a crash it comes back about when the lease expires; a job's tools stop a
tenth of a TTL before the lease expires; a lease that a slow acquire left
with less than two thirds of its TTL is renewed before its job starts; a
renewal that takes a quarter of the TTL is a warning; and this host
remembers parking a tenant's jobs for a park window, or a TTL if longer.
"""

from __future__ import annotations

import attrs

from imposer.settings import Settings

#: Share of the lease TTL a job's tools stop before its lease expires: room for clock skew
#: between this host and a sweeping one (``imposer doctor`` allows 5 s; 60 s at the 600 s TTL).
FENCE_SHARE = 0.1
#: Warn when one renewal takes more than this share of the lease TTL.
SLOW_SHARE = 0.25
#: A lease with less than this share of its TTL left when its job is about to start (a
#: stalled acquire took more than a third) is renewed first.
LAUNCH_SHARE = 2 / 3


@attrs.frozen(kw_only=True)
class LeaseTiming:
    """Every share of the lease TTL the parent acts on, from the two settings it comes from."""

    #: Seconds a lease lasts from its last renewal.
    ttl: float
    #: Seconds a parked message stays hidden (``IMPOSER_PARK_SECONDS``).
    park: float

    @classmethod
    def from_settings(cls, settings: Settings) -> "LeaseTiming":
        return cls(ttl=settings.lease_ttl_seconds, park=settings.park_seconds)

    @property
    def visibility(self) -> float:
        """How long a received or held message stays invisible: a lease TTL, so the message
        of a host that died comes back about when its lease can be reclaimed."""
        return self.ttl

    @property
    def fence_margin(self) -> float:
        """Seconds before its lease expires by which a job's tools must stop."""
        return FENCE_SHARE * self.ttl

    def tools_may_run(self, lease_left: float) -> float:
        """Seconds a job's tools may still run when its lease has *lease_left* seconds: they
        stop the fence margin before the lease could be reclaimed (``Pool.fence``)."""
        return lease_left - self.fence_margin

    def renew_before_launch(self, expires_at: float, now: float) -> bool:
        """Say whether a lease expiring at *expires_at* must be renewed before its job starts
        at *now*: its acquire took so long that the sweep could reclaim a starting job."""
        return expires_at - now < LAUNCH_SHARE * self.ttl

    def slow_renewal(self, took: float) -> bool:
        """Say whether a renewal that took *took* seconds ate enough of the TTL to warn."""
        return took > SLOW_SHARE * self.ttl

    @property
    def parked_window(self) -> float:
        """How long this host counts a tenant as having parked jobs after it parked or read
        one: a park window, or a lease TTL if longer (a receive hides a message that long)."""
        return max(self.park, self.ttl)
