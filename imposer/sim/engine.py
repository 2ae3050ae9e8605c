"""The discrete-event simulation: imposer's dispatch in virtual time, decisions from the worker.

Each host runs the parent loop of `imposer run` (``Supervisor.run``): settle
the jobs whose children finished (slot freed; message deleted, retried after
the backoff or requeued after the deferral); for each settled job, hand its
slot to its tenant's oldest parked job if another slot stays free, else owe
the tenant that hand-off (``Dispatcher.wake``); then dispatch what the
receive brought (start, park, defer or lend for each message, as
``imposer.worker.dispatch`` does), pay the hand-offs owed if it brought
nothing (``Dispatcher.wake_idle``), and ask for as many messages as slots
are free. Every decision is a call into ``imposer.worker.policy``: the cap
(``may_take_own_slot``), the borrow rule (``why_not_borrow``), the hand-off
and its owed payment (``may_hand_off``), send order (``oldest_first``),
retry backoff (``retry_delay``) and dead-lettering (``is_dead``).

Only time and AWS are simulated. The parent does one thing at a time and
each AWS call it makes takes ``call_seconds`` (the calls of each step are
counted as the worker makes them, see ``CALLS``; a tenant's cap is read at
most once per ``cap_cache_seconds`` per host), so parking a backlog takes
time, as it does for real. The receive runs beside the parent, as the
worker's receiver thread does (``imposer.worker.receiver``): one at a time,
for as many messages as slots were free when it was asked; it reaches SQS
``receive_seconds / 2`` after the ask and its answer comes back as long
after. With nothing visible it waits up to ``poll_seconds`` (the long poll)
for a message, and returns at once when one becomes visible; a child that
ends meanwhile is settled at once, the poll going on beside it. A
poll that returns empty is what pays an owed hand-off, so a capped tenant
whose job ended in its host's last free slot waits for the poll in flight
to end. A tenant found at its cap is taken to be at cap on that host for a
second (the dispatcher's memo) unless one of its jobs ends there.

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
    "receive": 1,             # ReceiveMessage (the receiver thread's, beside the parent)
    "cap": 1,                 # the tenant's cap (GetItem), once per cap_cache_seconds a host
    "acquire": 1,             # TransactWriteItems (a paused tenant's needs none)
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
#: Notes one waiting-table Query returns (``WaitingStore.oldest``).
NOTES_READ = 3
_FINISH, _VISIBLE, _TICK, _RESUME, _SERVE, _SERVE_ALL, _POLL_END, _ANSWER = range(8)
_WAITING, _VISIBLE_NOW, _PARKED, _RUNNING, _DONE = range(5)
#: The parent: waiting on its children and the receive, about to run a pass, in a pass.
_IDLE, _SCHEDULED, _BUSY = range(3)
#: The receive: none asked; on its way to SQS; long-polling; its answer on its way back;
#: its answer waiting for the parent; empty polls one after another while the parent
#: waits with nothing owed (worked out when something happens: ``_unchain``).
_RX_NONE, _RX_ASKED, _RX_WAIT, _RX_BACK, _RX_DONE, _RX_CHAIN = range(6)


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
    #: How long a host keeps a tenant's cap before reading it again (IMPOSER_CAP_CACHE_SECONDS).
    cap_cache_seconds: float = 5.0

    def __attrs_post_init__(self) -> None:
        if self.hosts < 1 or self.slots < 1:
            raise ConfigError("a simulated fleet needs at least one host of one slot")
        if self.cap < 0 or self.reserve < 0 or any(c < 0 for _, c in self.caps):
            raise ConfigError("caps and the reserve must not be negative")
        if min(self.park_seconds, self.defer_seconds, self.retry_seconds, self.call_seconds,
               self.receive_seconds, self.poll_seconds, self.cap_cache_seconds) < 0:
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
    #: Simulated work: receives (empty polls included), messages received, parks, park
    #: windows that ran out, hand-offs, hand-offs owed (the freed slot was the host's
    #: last), deferrals, borrows, retries, and the AWS calls (the receives' included).
    counts: Mapping[str, int]


def simulate(jobs: Sequence[SimJob], policy: Policy, boot: Sequence[float] = ()) -> Schedule:
    """Replay *jobs* under *policy* and return every attempt.

    *boot*: when each host's parent starts, per host (the others at 0). Hosts
    that start together split a burst between them; one that starts later
    finds a tenant's cap already held by the first, and which way a real
    fleet goes is a draw.
    """
    fleet = _Fleet(jobs, policy)
    for host, at in zip(fleet.hosts, boot):
        host.clock = at
    return fleet.run()


class _Host:
    """One parent and its receive: free slots, finished children, hand-offs owed."""

    __slots__ = ("index", "free", "done", "state", "token", "clock", "capped", "turn",
                 "owed", "cap_read", "stale", "rx", "rx_token", "rx_want", "rx_end",
                 "rx_result")

    def __init__(self, index: int, slots: int) -> None:
        self.index = index
        self.free = list(range(slots - 1, -1, -1))
        self.done: list[tuple[int, int, bool]] = []
        self.state = _IDLE
        self.token = 0
        #: The parent's own time: busy with AWS calls until then.
        self.clock = 0.0
        #: tenant -> until when this host takes it to be at its cap without asking.
        self.capped: dict[str, float] = {}
        #: The pass in progress (a generator), while the parent waits on AWS.
        self.turn = None
        #: tenant -> hand-offs owed to it (``Dispatcher._owed``), oldest tenant first.
        self.owed: dict[str, int] = {}
        #: tenant -> when this host last read its cap (``TenantStore.cap_for``'s cache).
        self.cap_read: dict[str, float] = {}
        #: ``_Fleet.shown`` when asking again could bring nothing new (-1: it could).
        self.stale = -1
        self.rx = _RX_NONE
        self.rx_token = 0
        self.rx_want = 0
        self.rx_end = 0.0
        self.rx_result: list[int] = []


class _Fleet:
    """The simulation's state: the queue, the hosts, counters and parked notes.

    A pass of a host's loop is a generator: it yields whenever the parent's
    own clock has run ahead of the fleet's (it waited on AWS), and resumes
    when the fleet gets there, so every decision (an acquire, a hand-off,
    what a receive takes) reads the queue and the counters as they are at
    that moment, between the other hosts' decisions. A host's receive moves
    through its own events beside its parent's passes.
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
                                     "handed_off", "owed", "deferred", "borrowed", "retries",
                                     "calls"), 0)
        self.events: list[tuple] = []
        self._tick = 0
        self._turn = 0
        #: A fleet-wide serve of the long polls is due (one per instant messages show at).
        self._serving = False
        self.now = 0.0
        #: Messages made visible so far: a host whose receive could bring nothing new
        #: asks again once this moves.
        self.shown = 0
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
                    if self._show(a):
                        self._poke(now)
            elif kind in (_TICK, _RESUME):
                host = hosts[a]
                if host.token == b:
                    if kind == _TICK:
                        host.clock = max(host.clock, now)
                        self._unchain(host, host.clock)
                        host.state = _BUSY
                        host.turn = self._pass(host)
                    self._resume(host)
            elif kind == _SERVE_ALL:
                self._serve_polls(now)
            elif hosts[a].rx_token == b:  # the receive's own events
                host = hosts[a]
                if kind == _SERVE:
                    self._serve(host, now)
                elif kind == _POLL_END:
                    if host.rx == _RX_WAIT:
                        self._poll_ended(host, now)
                elif host.rx == _RX_BACK:  # _ANSWER: the loop wakes on the receive's pipe
                    host.rx = _RX_DONE
                    if host.state == _IDLE:
                        self._schedule(host, now)
        last = max((e for e in self.end if e is not None), default=self.now)
        for host in hosts:
            self._unchain(host, last)  # count the empty polls up to the last job's end
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

    def _schedule(self, host: _Host, at: float) -> None:
        host.token += 1
        host.state = _SCHEDULED
        self._push(max(at, host.clock), _TICK, host.index, host.token)

    def _poke(self, now: float) -> None:
        """A message is visible: long polls return with it, idle parents with room ask."""
        if not self._serving:  # after every message shown at this instant (a later event)
            self._serving = True
            self._push(now, _SERVE_ALL, 0)
        for host in self.hosts:
            if host.rx == _RX_NONE and host.state == _IDLE and host.free:
                self._schedule(host, now)

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
    def _pass(self, host: _Host):
        """``Supervisor.run``'s loop body: settle, wake, dispatch what came, ask again.

        Yields while waiting on AWS.
        """
        done, host.done = host.done, []
        for job, slot, borrowed in done:
            yield from self._settle(job, host, slot, borrowed)
        if done:
            host.stale = -1  # slots and counters moved: a receive may bring work again
        for job, _, _ in done:
            yield from self._wake(host, self.tenant[job])
        if self._behind(host):
            yield  # the receive's answer may have come meanwhile
        if host.rx == _RX_DONE:
            batch, host.rx_result, host.rx = host.rx_result, [], _RX_NONE
            progress = yield from self._dispatch(host, batch)
            if not batch:
                yield from self._wake_idle(host)
            elif not progress:
                host.stale = self.shown  # asking again brings the same until something moves
        if self._behind(host):
            yield  # the last calls' time: what follows is decided when they are done
        if host.free and host.rx == _RX_NONE and self.left and host.stale != self.shown:
            self._ask(host)
        elif host.owed and host.rx == _RX_WAIT and self.policy.poll_seconds <= 0:
            self._answer(host, host.clock, [])  # asking at once again finds nothing: pay
        if host.done or host.rx == _RX_DONE:
            self._schedule(host, host.clock)  # round again: something came meanwhile
        else:
            host.state = _IDLE

    # -- the receive ---------------------------------------------------------------------
    def _ask(self, host: _Host) -> None:
        """``Receiver.ask``: one receive for as many messages as slots are free."""
        host.rx_token += 1
        host.rx, host.rx_want = _RX_ASKED, min(len(host.free), RECEIVE_MAX)
        self.counts["receives"] += 1
        self.counts["calls"] += CALLS["receive"]
        self._push(host.clock + self.policy.receive_seconds / 2, _SERVE, host.index,
                   host.rx_token)

    def _serve(self, host: _Host, now: float) -> None:
        """SQS has the receive: take what is visible, else long-poll for it.

        Without a long poll (``poll_seconds`` 0) the worker asks again at once
        for as long as nothing comes, which is a poll without end: the
        receive waits for a message here too, and comes back empty only for
        a parent that owes a hand-off (the empty receive pays it).
        """
        batch = self._take(host.rx_want)
        poll = self.policy.poll_seconds
        if batch or (poll <= 0 and host.owed):
            self._answer(host, now, batch)
        else:
            host.rx = _RX_WAIT
            if poll > 0:
                host.rx_end = now + poll
                self._push(host.rx_end, _POLL_END, host.index, host.rx_token)

    def _serve_polls(self, now: float) -> None:
        """Messages showed up: the hosts' long polls take them, one host first in turn."""
        self._serving = False
        hosts = self.hosts
        self._turn = (self._turn + 1) % len(hosts)
        for k in range(len(hosts)):
            if not self.visible:
                return
            host = hosts[(self._turn + k) % len(hosts)]
            self._unchain(host, now)
            if host.rx == _RX_WAIT:
                batch = self._take(host.rx_want)
                if batch:
                    self._answer(host, now, batch)

    def _poll_ended(self, host: _Host, now: float) -> None:
        """The long poll came back empty: to an idle parent owing nothing, that only means
        the next ask and its poll (and the next...: a chain); else the parent takes it."""
        if host.owed or host.state != _IDLE or host.done or not self.left:
            self._answer(host, now, [])
            return
        host.rx, host.rx_end = _RX_CHAIN, now + self.policy.receive_seconds
        self.counts["receives"] += 1
        self.counts["calls"] += CALLS["receive"]

    def _unchain(self, host: _Host, at: float) -> None:
        """Where a chain of empty polls that began with the one reaching SQS at ``rx_end``
        is at *at*: polling (until when), or its next ask on the way. Counts its receives."""
        if host.rx != _RX_CHAIN:
            return
        poll = self.policy.poll_seconds
        period = poll + self.policy.receive_seconds
        host.rx_token += 1
        if at < host.rx_end:
            host.rx = _RX_ASKED
            self._push(host.rx_end, _SERVE, host.index, host.rx_token)
            return
        polls = int((at - host.rx_end) // period)
        base = host.rx_end + polls * period
        if at - base >= poll:  # between two polls: the next ask is on its way
            polls += 1
            host.rx = _RX_ASKED
            self._push(base + period, _SERVE, host.index, host.rx_token)
        else:
            host.rx, host.rx_end = _RX_WAIT, base + poll
            self._push(host.rx_end, _POLL_END, host.index, host.rx_token)
        self.counts["receives"] += polls
        self.counts["calls"] += polls * CALLS["receive"]

    def _answer(self, host: _Host, now: float, batch: list[int]) -> None:
        host.rx, host.rx_result = _RX_BACK, batch
        self._push(now + self.policy.receive_seconds / 2, _ANSWER, host.index, host.rx_token)

    # -- messages ----------------------------------------------------------------------
    def _show(self, job: int) -> bool:
        """The message is visible (sent, or back after a window): receivable by any host.

        False when it never will be (a paused tenant's).
        """
        tenant = self.tenant[job]
        if self.seen[job]:
            self.in_flight_group[tenant] -= 1
        if self.cap[tenant] <= 0:  # paused: it would be deferred for ever
            self.state[job], self.status[job] = _DONE, "paused"
            self.left -= 1
            return False
        if self.state[job] == _PARKED:
            self.counts["park_expired"] += 1
        self.state[job] = _VISIBLE_NOW
        self.shown += 1
        heapq.heappush(self.visible.setdefault(tenant, []), (self.seq[job], job))
        return True

    def _take(self, count: int) -> list[int]:
        """One receive: up to *count* visible messages, in fair-queue order."""
        fair = self.policy.fair_queues
        heads = [(self.in_flight_group[t] if fair else 0, queue[0][0], t)
                 for t, queue in self.visible.items()]
        if not heads:
            return []
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

    def _acquire(self, host: _Host, tenant: str):
        """One acquire's calls: the tenant's cap (unless this host read it lately), the
        transaction (none for a paused tenant); yields until the transaction commits."""
        calls = CALLS["acquire"] if self.cap[tenant] > 0 else 0
        read = host.cap_read.get(tenant)
        if read is None or host.clock - read >= self.policy.cap_cache_seconds:
            host.cap_read[tenant] = host.clock
            calls += CALLS["cap"]
        self._spend(host, calls)
        if self._behind(host):
            yield

    def _dispatch(self, host: _Host, batch: list[int]):
        """``take_batch``: start, park, defer or lend; True if a message started or went away."""
        p, free = self.policy, host.free
        progress, candidates = False, []
        for job in batch:
            tenant = self.tenant[job]
            cap = self.cap[tenant]
            if not free:  # (the receive asked for no more than were free: never here)
                self._back(job)
                continue
            if p.memo and host.capped.get(tenant, -1.0) > host.clock:
                own = False  # known at cap: no transaction
            else:
                yield from self._acquire(host, tenant)
                own = rules.may_take_own_slot(self.inflight[tenant], cap)
                if not own and p.memo and cap > 0:
                    host.capped[tenant] = host.clock + min(MEMO_SECONDS, p.defer_seconds)
            if own:
                self._start(job, host, False)
                progress = True
            elif cap > 0 and p.borrow:
                candidates.append(job)
            else:
                progress |= self._wait(job, cap, host)
        for job in candidates:  # lend_idle_slots: after the batch's own starts
            tenant = self.tenant[job]
            if rules.why_not_borrow(p.borrow, len(free), p.reserve, tenant,
                                    self._blockers()) is None:
                yield from self._acquire(host, tenant)
                if not rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]):
                    self._start(job, host, True)
                    self.counts["borrowed"] += 1
                    progress = True
                    continue
            progress |= self._wait(job, self.cap[tenant], host)
        return progress

    def _back(self, job: int) -> None:
        """The message is visible again at once, where it was in its group's order."""
        tenant = self.tenant[job]
        self.in_flight_group[tenant] -= 1
        self.state[job] = _VISIBLE_NOW
        heapq.heappush(self.visible.setdefault(tenant, []), (self.seq[job], job))

    def _wait(self, job: int, cap: int, host: _Host) -> bool:
        """Park the message (at cap) or defer it (paused); a zero window keeps it visible.

        False when the message is visible again at once (nothing changed).
        """
        tenant = self.tenant[job]
        self._count_waiting(job)
        window = self.policy.park_seconds if cap > 0 else self.policy.defer_seconds
        self._spend(host, CALLS["park"] if cap > 0 else CALLS["defer"])
        if window <= 0:
            self._back(job)
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

    # -- hand-offs -----------------------------------------------------------------------
    def _wake(self, host: _Host, tenant: str):
        """``Dispatcher.wake``: one parked job of the tenant takes the freed slot, or is owed it."""
        host.capped.pop(tenant, None)
        if rules.may_hand_off(len(host.free)):
            yield from self._hand_off(host, tenant)
        else:
            host.owed[tenant] = min(self.policy.slots, host.owed.get(tenant, 0) + 1)
            self.counts["owed"] += 1

    def _wake_idle(self, host: _Host):
        """``Dispatcher.wake_idle``: the receive came back empty; pay what is owed, oldest first."""
        owed = host.owed
        for tenant in list(owed):
            while owed.get(tenant) and rules.may_hand_off(len(host.free), queue_empty=True):
                owed[tenant] -= 1
                started = yield from self._hand_off(host, tenant)
                if not started:
                    owed.pop(tenant, None)
            if not owed.get(tenant):
                owed.pop(tenant, None)

    def _live(self, note: tuple[float, int, int, int]) -> bool:
        return self.version[note[3]] == note[2] and self.state[note[3]] == _PARKED

    def _hand_off(self, host: _Host, tenant: str):
        """``Dispatcher._hand_off``: read the tenant's oldest notes, start the first still
        parked in a free slot, inside the acquire; True if one started."""
        self._spend(host, CALLS["notes"])
        if self._behind(host):
            yield
        notes = self.notes.get(tenant)
        read = []
        while notes and len(read) < NOTES_READ:
            note = heapq.heappop(notes)
            if self._live(note):  # a note taken, or back in the queue, is gone
                read.append(note)
        for note in read:
            heapq.heappush(notes, note)
        for note in read:
            yield from self._acquire(host, tenant)
            if not self._live(note):
                continue  # another host took it meanwhile: the next one
            if not rules.may_take_own_slot(self.inflight[tenant], self.cap[tenant]):
                if self.policy.memo:
                    host.capped[tenant] = host.clock + min(MEMO_SECONDS,
                                                           self.policy.defer_seconds)
                return False
            self._start(note[3], host, False)  # its note goes stale: no count moves
            self.counts["handed_off"] += 1
            return True
        return False
