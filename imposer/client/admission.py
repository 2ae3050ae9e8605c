"""Admission control on the tenant side: idempotency, rate limit, in-flight cap.

Every check and the marks that follow a pass run in one Lua script, so two
publishers racing with one token (or for the last slot) cannot both pass.
The time is passed into the script as an argument rather than read from
Redis, so tests move the clock by hand and never sleep through a window.

Keys of one tenant share a ``{tenant}`` hash tag to stay on one cluster slot:
``<prefix>:{tenant}:token:<token>`` (hash: state, job_id),
``<prefix>:{tenant}:rate`` (sorted set job_id -> submit time) and
``<prefix>:{tenant}:inflight`` (sorted set token -> submit time).

One Admission may serve many threads: its pool holds at most
``max_connections`` and a call waits up to ``wait`` seconds for one to come
free; Redis that cannot be reached in time is :class:`AdmissionUnavailable`,
never a pool error of redis-py.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any, Callable, Iterator, Mapping, Union

import attrs
import redis

from imposer.client.errors import (
    AdmissionUnavailable,
    DuplicateToken,
    InflightCapReached,
    RateLimited,
)
from imposer.models import valid_id

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class Limits:
    """One tenant's admission settings, with the seed's defaults."""

    #: Seconds a token is remembered (in flight, then completed).
    idempotency_ttl: float = 48 * 3600.0
    #: Jobs allowed per rate window.
    rate_limit: int = 100
    #: Length of the sliding rate window in seconds.
    rate_window: float = 60.0
    #: Jobs submitted and not yet confirmed that a tenant may have.
    inflight_cap: int = 500
    #: An unconfirmed job stops counting after this long, so a lost webhook cannot wedge a tenant.
    inflight_ttl: float = 24 * 3600.0


#: Per-tenant overrides: a mapping or a function returning Limits (None = defaults).
Overrides = Union[Mapping[str, Limits], Callable[[str], Union[Limits, None]], None]

_ADMIT = """
local held = redis.call('HMGET', KEYS[1], 'state', 'job_id')
if held[1] then
  return {'duplicate', held[1], held[2] or ''}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {'rate', oldest[2]}
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[5])
local inflight = redis.call('ZCARD', KEYS[3])
if inflight >= tonumber(ARGV[6]) then
  return {'cap', tostring(inflight)}
end
redis.call('HSET', KEYS[1], 'state', 'in_flight', 'job_id', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[8])
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[10])
redis.call('PEXPIRE', KEYS[3], ARGV[9])
return {'ok'}
"""

_UNDO = """
local held = redis.call('HMGET', KEYS[1], 'state', 'job_id')
if held[1] ~= 'in_flight' or (ARGV[2] ~= '' and held[2] ~= ARGV[2]) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], held[2])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
"""

_CONFIRM = """
local released = redis.call('ZREM', KEYS[3], ARGV[1])
local job = redis.call('HGET', KEYS[1], 'job_id') or ARGV[2]
redis.call('HSET', KEYS[1], 'state', 'completed', 'job_id', job)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return released
"""


#: Connections one Admission opens at most; further threads wait for one.
MAX_CONNECTIONS = 50
#: Seconds a call waits for a free connection (or a reply) before AdmissionUnavailable.
WAIT_SECONDS = 10.0


@contextlib.contextmanager
def _reaching(what: str) -> Iterator[None]:
    """Turn Redis that cannot be reached (or no free connection in time) into our error."""
    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise AdmissionUnavailable(f"admission control cannot {what}: Redis: {exc}") from None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


class Admission:
    """Decide whether a tenant may publish a job, and remember what it published."""

    def __init__(self, client: redis.Redis, *, limits: Limits | None = None,
                 overrides: Overrides = None, now: Callable[[], float] = time.time,
                 prefix: str = "imposer:admission") -> None:
        self.redis = client
        self.limits = limits or Limits()
        self.overrides = overrides
        self.now = now
        self.prefix = prefix
        self._admit = client.register_script(_ADMIT)
        self._undo = client.register_script(_UNDO)
        self._confirm = client.register_script(_CONFIRM)

    @classmethod
    def from_url(cls, url: str, *, limits: Limits | None = None, overrides: Overrides = None,
                 now: Callable[[], float] = time.time, prefix: str = "imposer:admission",
                 max_connections: int = MAX_CONNECTIONS, wait: float = WAIT_SECONDS,
                 **fields: Any) -> "Admission":
        """Connect to Redis at *url*; extra keywords are default Limits fields.

        The pool blocks: a thread beyond ``MAX_CONNECTIONS`` waits up to
        ``WAIT_SECONDS`` for a connection, then gets AdmissionUnavailable.
        """
        limits = attrs.evolve(limits or Limits(), **fields)
        pool = redis.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=wait, socket_timeout=wait,
            socket_connect_timeout=wait)
        return cls(redis.Redis(connection_pool=pool), limits=limits, overrides=overrides,
                   now=now, prefix=prefix)

    def limits_for(self, tenant_id: str) -> Limits:
        """Return the tenant's override, or the defaults when it has none."""
        if callable(self.overrides):
            found = self.overrides(tenant_id)
        elif self.overrides is not None:
            found = self.overrides.get(tenant_id)
        else:
            found = None
        return found or self.limits

    def _keys(self, tenant_id: str, token: str) -> list[str]:
        if not valid_id(tenant_id):
            raise ValueError(f"invalid tenant id: {tenant_id!r}")
        if not isinstance(token, str) or not token or len(token) > 256:
            raise ValueError("token must be a non-empty string of at most 256 characters")
        base = f"{self.prefix}:{{{tenant_id}}}"
        return [f"{base}:token:{token}", f"{base}:rate", f"{base}:inflight"]

    def admit(self, tenant_id: str, token: str, job_id: str) -> None:
        """Let the job through and record it, or raise the AdmissionError that refuses it."""
        keys = self._keys(tenant_id, token)
        limits = self.limits_for(tenant_id)
        now = float(self.now())
        with _reaching("admit a job"):
            reply = self._admit(keys=keys, args=[
                repr(now), job_id, repr(now - limits.rate_window), limits.rate_limit,
                repr(now - limits.inflight_ttl), limits.inflight_cap,
                _ms(limits.idempotency_ttl), _ms(limits.rate_window), _ms(limits.inflight_ttl),
                token,
            ])
        verdict = [_text(part) for part in reply]
        extra = {"action": f"admission_{verdict[0]}", "tenant_id": tenant_id, "job_id": job_id}
        if verdict[0] == "ok":
            logger.debug("admitted token %r", token, extra=extra)
            return
        logger.info("refused token %r: %s", token, verdict[0], extra=extra)
        if verdict[0] == "duplicate":
            raise DuplicateToken(token, verdict[2], verdict[1])
        if verdict[0] == "rate":
            retry_after = max(0.0, float(verdict[1]) + limits.rate_window - now)
            raise RateLimited(retry_after, limits.rate_limit, limits.rate_window)
        raise InflightCapReached(limits.inflight_cap, int(verdict[1]))

    def undo(self, tenant_id: str, token: str, job_id: str | None = None) -> bool:
        """Forget an admission whose publish failed, so a retry can pass.

        With *job_id*, only that job's admission is undone; a token that is
        completed is never forgotten. Return whether anything was undone.
        """
        keys = self._keys(tenant_id, token)
        with _reaching("undo an admission"):
            return bool(self._undo(keys=keys, args=[token, job_id or ""]))

    def confirm(self, tenant_id: str, token: str, job_id: str | None = None) -> bool:
        """Release the job's in-flight slot and remember its token as completed.

        Call it when the completion webhook arrives. The token stays refused
        for the idempotency TTL from now; *job_id* is stored only when the
        token's record has already expired. Return whether a slot was released.
        """
        keys = self._keys(tenant_id, token)
        limits = self.limits_for(tenant_id)
        with _reaching("confirm a job"):
            released = self._confirm(keys=keys, args=[token, job_id or "",
                                                      _ms(limits.idempotency_ttl)])
        return bool(released)

    def inflight(self, tenant_id: str) -> int:
        """Count the tenant's jobs submitted and not yet confirmed (stale ones excluded)."""
        _, _, key = self._keys(tenant_id, "-")
        cutoff = float(self.now()) - self.limits_for(tenant_id).inflight_ttl
        with _reaching("count jobs in flight"):
            return int(self.redis.zcount(key, f"({cutoff!r}", "+inf"))

    def close(self) -> None:
        self.redis.close()
