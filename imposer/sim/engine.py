"""The discrete-event simulation: imposer's dispatch in virtual time, decisions from the worker.

Each host runs the parent loop of `imposer run`: settle the jobs whose
children finished (slot freed; message deleted, retried after the backoff or
requeued after the deferral), hand each settled tenant's freed slot to its
oldest parked job while another slot stays free, then receive as many
messages as there are free slots and start, park, defer or lend for each, as
``imposer.worker.dispatch`` does. Every decision is a call into
``imposer.worker.policy``: the cap (``may_take_own_slot``), the borrow rule
(``why_not_borrow``), the hand-off (``may_hand_off``), send order
(``oldest_first``), retry backoff (``retry_delay``) and dead-lettering
(``is_dead``).

Only time and AWS are simulated. The parent does one thing at a time and
each AWS call takes ``call_seconds`` (a receive ``receive_seconds``; the
calls of each step are counted as the worker makes them, see ``CALLS``), so
parking a backlog takes time, as it does for real. A parent with free
slots and nothing to receive sits in a long poll of ``poll_seconds``, which
returns at once when a message becomes visible but does not see a child
finish: that job is settled when the poll ends. (A recorded run time
already holds that delay, so replays of records use no poll.) A tenant
found at its cap is taken to be at cap on that host for a second (the
dispatcher's memo) unless one of its jobs ends there.

Delivery is that of ``imposer.aws.localstack``, SQS fair queues: visible
messages of the groups with the fewest messages in flight first, each group
in send order (or strict send order with ``fair_queues=False``). A parked
message is invisible for the park window and comes back by itself unless a
hand-off starts it first; a paused tenant's (cap 0) messages never start.

``Policy.perfect`` is the limit of instant delivery: no AWS time, no poll,
no memo, and zero park and deferral windows, so a message at its tenant's
cap stays visible and is taken the moment its tenant is below its cap again
(the cap with instant refill).
"""

from __future__ import annotations

import heapq
from typing import Mapping, NamedTuple, Sequence

import attrs

from imposer.errors import ConfigError
from imposer.sim.workload import SimJob
from imposer.worker import policy as rules

#: Messages one receive returns at most (SQS's limit).
RECEIVE_MAX = 10
#: AWS calls the parent makes for each step, as the worker's code makes them.
CALLS = {
    "receive": 1,             # ReceiveMessage
    "acquire": 2,             # the tenant's cap (GetItem), then TransactWriteItems
    "park": 3,                # ChangeMessageVisibility, waiting-table PutItem, job note
    "defer": 2,               # ChangeMessageVisibility, job note
    "notes": 1,               # waiting-table Query of the tenant's oldest notes
    "succeeded": 5,           # release, plate HeadObject + CopyObject + DeleteObject, delete
    "failed": 2,              # release, DeleteMessage
    "retry": 3,               # job GetItem (failures so far), release, visibility
    "dead": 4,                # job GetItem, release, DLQ SendMessage, DeleteMessage
    "requeue": 2,             # release, visibility
}
#: How long the dispatcher remembers a tenant at its cap (``Dispatcher._capped``).
MEMO_SECONDS = 1.0
_FINISH, _VISIBLE, _TICK, _RESUME = 0, 1, 2, 3
_WAITING, _VISIBLE_NOW, _PARKED, _RUNNING, _DONE = range(5)
_IDLE, _SCHEDULED, _POLLING, _BUSY = range(4)


def _caps(value) -> tuple[tuple[str, int], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(t), int(c)) for t, c in items))


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
    #: The dispatcher's memo of tenants found at their cap.
    memo: bool = True

    def __attrs_post_init__(self) -> None:
        if self.hosts < 1 or self.slots < 1:
            raise ConfigError("a simulated fleet needs at least one host of one slot")
        if self.cap < 0 or self.reserve < 0 or any(c < 0 for _, c in self.caps):
            raise ConfigError("caps and the reserve must not be negative")
        if min(self.park_seconds, self.defer_seconds, self.retry_seconds, self.call_seconds,
               self.receive_seconds, self.poll_seconds) < 0:
            raise ConfigError("delays must not be negative")
        if self.max_attempts < 1:
            raise ConfigError("max attempts must be at least 1")

    def cap_of(self, tenant: str) -> int:
        return dict(self.caps).get(tenant, self.cap)

    @property
    def slots_total(self) -> int:
        return self.hosts * self.slots

    def perfect(self) -> "Policy":
        """The same rules with instant delivery: no AWS time, no windows, no poll, no memo."""
        return attrs.evolve(self, park_seconds=0.0, defer_seconds=0.0, call_seconds=0.0,
                            receive_seconds=0.0, poll_seconds=0.0, memo=False)

    @property
    def label(self) -> str:
        lend = f"borrow (reserve {self.reserve})" if self.borrow else "no borrow"
        return f"{self.hosts}x{self.slots} slots, cap {self.cap}, {lend}"


class Attempt(NamedTuple):
    """One attempt of a job on a slot."""

    job: int
    host: int
    slot: int
    start: float
    end: float
    borrowed: bool
    fate: str


@attrs.frozen(kw_only=True)
class Schedule:
    """What happened to every job of the workload under one policy."""

    jobs: tuple[SimJob, ...]
    policy: Policy
    attempts: tuple[Attempt, ...]
    #: Per job (index of ``jobs``): first start, end of the last attempt (None if never).
    first_start: tuple[float | None, ...]
    end: tuple[float | None, ...]
    #: Per job: succeeded, failed, dead, or paused (its tenant's cap is 0).
    status: tuple[str, ...]
    #: Simulated work: receives, messages received, parks, park windows that ran out,
    #: hand-offs, deferrals, borrows, retries, and the parent's AWS calls.
    counts: Mapping[str, int]


def simulate(jobs: Sequence[SimJob], policy: Policy) -> Schedule:
    """Replay *jobs* under *policy* and return every attempt."""
    return _Fleet(jobs, policy).run()


class _Host:
    """One parent: its free slots, finished children to settle, and what it is doing."""

    __slots__ = ("index", "free", "done", "state", "token", "poll_end", "clock", "capped",
                 "turn")

    def __init__(self, index: int, slots: int) -> None:
        self.index = index
        self.free = list(range(slots - 1, -1, -1))
        self.done: list[tuple[int, int, bool]] = []
        self.state = _IDLE
        self.token = 0
        self.poll_end = 0.0
        #: The parent's own time: busy with AWS calls until then.
        self.clock = 0.0
        #: tenant -> until when this host takes it to be at its cap without asking.
        self.capped: dict[str, float] = {}
        #: The pass in progress (a generator), while the parent waits on AWS.
        self.turn = None


class _Fleet:
    """The simulation's state: the queue, the hosts, counters and parked notes.

    A pass of a host's loop is a generator: it yields whenever the parent's
    own clock has run ahead of the fleet's (it waited on AWS), and resumes
    when the fleet gets there, so every decision (a receive, an acquire, a
    hand-off) reads the queue and the counters as they are at that moment,
    between the other hosts' decisions.
    """

    def __init__(self, jobs: Sequence[SimJob], policy: Policy) -> None:
        self.jobs, self.policy = tuple(jobs), policy
        n = len(self.jobs)
        self.tenant = [j.tenant for j in self.jobs]
        self.cap = {t: policy.cap_of(t) for t in set(self.tenant)}
        # Send order: a tenant's jobs keep their submission order, as the queue's do.
        order = rules.oldest_first(range(n), lambda i: (self.jobs[i].arrival, i))
        self.seq = [0] * n
        for rank, i in enumerate(order):
            self.seq[i] = rank
        self.state = [_WAITING] * n
        self.version = [0] * n
        self.attempt_no = [0] * n
        self.failures = [0] * n
        self.seen = [False] * n
        self.counted = [False] * n
        self.first_start: list[float | None] = [None] * n
        self.end: list[float | None] = [None] * n
        self.status = ["waiting"] * n
        self.attempts: list[Attempt] = []
        self.hosts = [_Host(h, policy.slots) for h in range(policy.hosts)]
        self.inflight = dict.fromkeys(self.cap, 0)
        self.borrowed = dict.fromkeys(self.cap, 0)
        self.in_flight_group = dict.fromkeys(self.cap, 0)
        self.visible: dict[str, list[tuple[int, int]]] = {}
        self.notes: dict[str, list[tuple[float, int, int, int]]] = {}
        self.blocking: dict[str, int] = {}
        self.counts = dict.fromkeys(("receives", "received", "parked", "park_expired",
                                     "handed_off", "deferred", "borrowed", "retries", "calls"),
                                    0)
        self.events: list[tuple] = []
        self._tick = 0
        self._turn = 0
        self.now = 0.0
        #: Messages made visible so far: a pass that saw some arrive goes round again.
        self.shown = 0
        self.instant = policy.call_seconds == 0 and policy.receive_seconds == 0
        #: Jobs not yet final: while some are, a host with free slots keeps polling.
        self.left = n
        for i, job in enumerate(self.jobs):
            self._push(job.arrival, _VISIBLE, i, 0)

    # -- the event loop ----------------------------------------------------------------
    def run(self) -> Schedule:
        events, hosts = self.events, self.hosts
        while events:
            now, _, kind, a, b, c, d = heapq.heappop(events)
            self.now = now
            if kind == _FINISH:
                host = hosts[b]
                host.done.append((a, c, d))
                if host.state == _IDLE:
                    self._schedule(host, now)
            elif kind == _VISIBLE:
                if self.version[a] == b and self.state[a] in (_WAITING, _PARKED):
                    self._show(a)
                    self._poke(now)
            elif hosts[a].token == b:
                host = hosts[a]
                if kind == _TICK:
                    host.clock = max(host.clock, now)
                    host.state = _BUSY
                    host.turn = self._pass(host, polled=c)
                self._resume(host)
        return Schedule(jobs=self.jobs, policy=self.policy, attempts=tuple(self.attempts),
                        first_start=tuple(self.first_start), end=tuple(self.end),
                        status=tuple(self.status), counts=dict(self.counts))

    def _push(self, at: float, kind: int, a, b=0, c=0, d=False) -> None:
        self._tick += 1
        heapq.heappush(self.events, (at, self._tick, kind, a, b, c, d))

    def _resume(self, host: _Host) -> None:
        """Run the host's pass until it waits on AWS (then come back then) or ends."""
        for _ in host.turn:
            host.token += 1
            self._push(host.clock, _RESUME, host.index, host.token)
            return
        host.turn = None

    def _schedule(self, host: _Host, at: float, polled: bool = False) -> None:
        host.token += 1
        host.state = _SCHEDULED
        self._push(max(at, host.clock), _TICK, host.index, host.token, polled)

    def _poke(self, now: float) -> None:
        """A message is visible: polling hosts' receives return, idle hosts with room wake."""
        hosts = self.hosts
        self._turn = (self._turn + 1) % len(hosts)
        for k in range(len(hosts)):
            host = hosts[(self._turn + k) % len(hosts)]
            if host.state == _POLLING or (host.state == _IDLE and host.free):
                self._schedule(host, now, polled=host.state == _POLLING)

    def _behind(self, host: _Host) -> bool:
        """Has something happened meanwhile that the host must see before it goes on?

        The host's clock ran ahead while it waited on AWS; it needs to wait
        for the fleet only if an event falls in between (or else nothing
        could have changed).
        """
        events = self.events
        return host.clock > self.now and bool(events) and events[0][0] <= host.clock

    def _spend(self, host: _Host, calls: int) -> None:
        self.counts["calls"] += calls
        host.clock += calls * self.policy.call_seconds

    # -- one pass of the parent loop -----------------------------------------------------
    def _pass(self, host: _Host, polled: bool):
        """``Supervisor.run``'s loop body: settle, hand off, then receive.

        *polled*: the long poll returned with messages; they are dispatched
        first, then the loop goes round again. Yields while waiting on AWS.
        """
        shown = self.shown
        if polled:
            progress = yield from self._receive(host)
        else:
            woken = []
            while host.done:
                job, slot, borrowed = host.done.pop(0)
                yield from self._settle(job, host, slot, borrowed)
                woken.append(self.tenant[job])
            for tenant in woken:
                yield from self._wake(host, tenant)
            progress = False
            if host.free and self.visible:
                progress = yield from self._receive(host)
                while progress and self.instant and host.free and self.visible:
                    progress = yield from self._receive(host)
        if self._behind(host):
            yield  # the last calls' time: what follows is decided when they are done
        if host.free and self.visible and (progress or self.shown != shown) \
                and not self.instant:
            self._schedule(host, host.clock)  # the loop goes round: receive again
        elif host.done or (progress and polled):
            self._schedule(host, host.clock)  # round again: settle what finished meanwhile
        elif host.free and self.policy.poll_seconds > 0 and self.left:
            if not polled or host.clock >= host.poll_end:
                host.poll_end = host.clock + self.policy.poll_seconds
            host.state = _POLLING
            host.token += 1
            self._push(host.poll_end, _TICK, host.index, host.token, False)
        else:
            host.state = _IDLE

    # -- messages ----------------------------------------------------------------------
    def _show(self, job: int) -> None:
        """The message is visible (sent, or back after a window): receivable by any host."""
        tenant = self.tenant[job]
        if self.seen[job]:
            self.in_flight_group[tenant] -= 1
        if self.cap[tenant] <= 0:  # paused: it would be deferred for ever
            self.state[job], self.status[job] = _DONE, "paused"
            self.left -= 1
            return
        if self.state[job] == _PARKED:
            self.counts["park_expired"] += 1
        self.state[job] = _VISIBLE_NOW
        self.shown += 1
        heapq.heappush(self.visible.setdefault(tenant, []), (self.seq[job], job))

    def _take(self, count: int, skip: set[str]) -> list[int]:
        """One receive: up to *count* visible messages, fair-queue order, skipping *skip*."""
        fair = self.policy.fair_queues
        heads = [(self.in_flight_group[t] if fair else 0, queue[0][0], t)
                 for t, queue in self.visible.items() if t not in skip]
        if not heads:
            return []
        self.counts["receives"] += 1
        taken = []
        heapq.heapify(heads)
        while heads and len(taken) < count:
            key, _, tenant = heapq.heappop(heads)
            queue = self.visible[tenant]
            _, job = heapq.heappop(queue)
            if queue:
                heapq.heappush(heads, (key, queue[0][0], tenant))
            else:
                del self.visible[tenant]
            taken.append(job)
        for job in taken:  # in flight after the receive: SQS orders once per call
            self.in_flight_group[self.tenant[job]] += 1
            self.seen[job] = True
        self.counts["received"] += len(taken)
        return taken

    def _receive(self, host: _Host):
        """``fill_free_slots`` + ``take_batch``: True if a message started or went away."""
        p, free = self.policy, host.free
        skip: set[str] = set()
        host.clock += p.receive_seconds / 2
        if self._behind(host):
            yield  # SQS hands out the messages half-way through the call
        batch = self._take(min(len(free), RECEIVE_MAX), skip)
        self.counts["calls"] += CALLS["receive"]
        host.clock += p.receive_seconds / 2
        if not batch:
            return False
        progress, candidates = False, []
        for job in batch:
            tenant = self.tenant[job]
            cap = self.cap[tenant]
            if p.memo and host.capped.get(tenant, -1.0) > host.clock:
                own = False  # known at cap: no transaction
            else:
                self._spend(host, CALLS["acquire"] if cap > 0 else 1)
                if self._behind(host):
                    yield  # the transaction commits at its end
                own = rules.may_take_own_slot(self.inflight[tenant], cap)
                if not own and p.memo and cap > 0:
                    host.capped[tenant] = host.clock + min(MEMO_SECONDS, p.defer_seconds)
            if own:
                self._start(job, host, False)
                progress = True
            elif cap > 0 and p.borrow:
                candidates.append(job)
            else:
                progress |= self._wait(job, cap, skip, host)
        for job in candidates:  # lend_idle_slots: after the batch's own starts
            tenant = self.tenant[job]
            if rules.why_not_borrow(p.borrow, len(free), p.reserve, tenant,
                                    self._blockers()) is None:
                self._spend(host, CALLS["acquire"])
                if self._behind(host):
                    yield
                if not rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]):
                    self._start(job, host, True)
                    self.counts["borrowed"] += 1
                    progress = True
                    continue
            progress |= self._wait(job, self.cap[tenant], skip, host)
        return progress

    def _wait(self, job: int, cap: int, skip: set[str], host: _Host) -> bool:
        """Park the message (at cap) or defer it (paused); a zero window keeps it visible.

        False when the message is visible again at once (nothing changed).
        """
        tenant = self.tenant[job]
        self._count_waiting(job)
        window = self.policy.park_seconds if cap > 0 else self.policy.defer_seconds
        self._spend(host, CALLS["park"] if cap > 0 else CALLS["defer"])
        if window <= 0:
            self.in_flight_group[tenant] -= 1
            self.state[job] = _VISIBLE_NOW
            heapq.heappush(self.visible.setdefault(tenant, []), (self.seq[job], job))
            skip.add(tenant)
            return False
        self.version[job] += 1
        self._push(host.clock + window, _VISIBLE, job, self.version[job])
        if cap > 0:
            self.state[job] = _PARKED
            self.counts["parked"] += 1
            heapq.heappush(self.notes.setdefault(tenant, []),
                           (self.jobs[job].arrival, self.seq[job], self.version[job], job))
        else:
            self.state[job] = _WAITING
            self.counts["deferred"] += 1
        return True

    def _count_waiting(self, job: int) -> None:
        """A job seen waiting has a queued or retrying record: the borrow view counts it."""
        if not self.counted[job]:
            self.counted[job] = True
            tenant = self.tenant[job]
            self.blocking[tenant] = self.blocking.get(tenant, 0) + 1

    def _blockers(self) -> list[str]:
        """Tenants below their cap with work waiting, as the borrow view sees them."""
        return [t for t, n in self.blocking.items()
                if n and rules.may_take_own_slot(self.inflight[t], self.cap[t])]

    # -- slots -------------------------------------------------------------------------
    def _start(self, job: int, host: _Host, borrowed: bool) -> None:
        tenant, spec = self.tenant[job], self.jobs[job]
        slot = host.free.pop()
        if borrowed:
            self.borrowed[tenant] += 1
        else:
            self.inflight[tenant] += 1
        if self.counted[job]:
            self.counted[job] = False
            self.blocking[tenant] -= 1
        self.state[job] = _RUNNING
        self.version[job] += 1
        n = self.attempt_no[job]
        self.attempt_no[job] = n + 1
        fate = spec.fates[min(n, len(spec.fates) - 1)]
        now = host.clock
        if self.first_start[job] is None:
            self.first_start[job] = now
        end = now + spec.run
        self.attempts.append(Attempt(job, host.index, slot, now, end, borrowed, fate))
        self._push(end, _FINISH, job, host.index, slot, borrowed)

    def _settle(self, job: int, host: _Host, slot: int, borrowed: bool):
        """``Completer.settle``: free the slot, then delete, retry or requeue the message."""
        tenant, p = self.tenant[job], self.policy
        fates = self.jobs[job].fates
        fate = fates[min(self.attempt_no[job] - 1, len(fates) - 1)]
        if fate == "retry":
            self._spend(host, 1)  # the job's failures so far
        self._spend(host, 1)
        if self._behind(host):
            yield  # the release transaction commits: the counter is down from here
        self.end[job] = host.clock  # the record's finished_at is the release's
        host.free.append(slot)
        if borrowed:
            self.borrowed[tenant] -= 1
        else:
            self.inflight[tenant] -= 1
        delay = None
        if fate == "retry":
            self.failures[job] += 1
            if rules.is_dead(self.failures[job], p.max_attempts):
                fate = "dead"
            else:
                delay = rules.retry_delay(p.retry_seconds, self.failures[job])
        elif fate == "requeue":
            delay = p.defer_seconds
        self._spend(host, CALLS[fate] - 1 - (fate in ("retry", "dead")))
        if delay is None:
            self.state[job], self.status[job] = _DONE, fate
            self.in_flight_group[tenant] -= 1
            self.left -= 1
            return
        self.counts["retries"] += 1
        self.state[job] = _WAITING
        self._count_waiting(job)
        self.version[job] += 1
        self._push(host.clock + delay, _VISIBLE, job, self.version[job])

    def _wake(self, host: _Host, tenant: str):
        """``Dispatcher.wake``: the settled tenant's oldest parked job takes the freed slot."""
        host.capped.pop(tenant, None)
        notes = self.notes.get(tenant)
        free = host.free
        while rules.may_hand_off(len(free)):
            self._spend(host, CALLS["notes"])
            if self._behind(host):
                yield
            while notes and (self.version[notes[0][3]] != notes[0][2]
                             or self.state[notes[0][3]] != _PARKED):
                heapq.heappop(notes)  # taken meanwhile, or back in the queue: a stale note
            if not notes:
                return
            _, _, version, job = notes[0]
            self._spend(host, CALLS["acquire"])
            if self._behind(host):
                yield
            if self.version[job] != version or self.state[job] != _PARKED:
                continue  # another host took it meanwhile: look again
            if not rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]):
                if self.policy.memo:
                    host.capped[tenant] = host.clock + min(MEMO_SECONDS,
                                                           self.policy.defer_seconds)
                return
            heapq.heappop(notes)  # a parked message is in flight already: no count moves
            self._start(job, host, False)
            self.counts["handed_off"] += 1
