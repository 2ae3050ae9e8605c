"""SQS in virtual time: fair-queue delivery of visible messages, and each host's receive.

Delivery is that of ``imposer.dev.localstack.stack``, SQS fair queues: visible
messages of the groups with the fewest messages in flight first, each group
in send order (or strict send order with ``fair_queues=False``). The receive
runs beside the parent, as the worker's receiver thread does
(``imposer.worker.receive.receiver``): one at a time, for a message per slot free
when it was asked and as many more as the last batch parked
(``policy.receive_size``); with nothing visible it long-polls.
"""

from __future__ import annotations

import heapq

from imposer.sim.state import (
    ANSWER,
    CALLS,
    DONE,
    IDLE,
    PARKED,
    POLL_END,
    RX_ASKED,
    RX_BACK,
    RX_CHAIN,
    RX_WAIT,
    SERVE,
    VISIBLE_NOW,
    Host,
)


class Delivery:
    """Which messages are visible, what a receive takes, and when it comes back.

    Mixed into ``engine._Fleet``: its methods read and move the fleet's state
    (the queue, the counters, the hosts) as the event loop reaches each step.
    """

    # -- messages ----------------------------------------------------------------------
    def _show(self, job: int) -> bool:
        """The message is visible (sent, or back after a window): receivable by any host.

        False when it never will be (a paused tenant's).
        """
        tenant = self.tenant[job]
        if self.seen[job]:
            self.in_flight_group[tenant] -= 1
        if self.cap[tenant] <= 0:  # paused: it would be deferred for ever
            self.state[job], self.status[job] = DONE, "paused"
            self.left -= 1
            return False
        if self.state[job] == PARKED:
            self.counts["park_expired"] += 1
        self.state[job] = VISIBLE_NOW
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


    def _back(self, job: int) -> None:
        """The message is visible again at once, where it was in its group's order."""
        tenant = self.tenant[job]
        self.in_flight_group[tenant] -= 1
        self.state[job] = VISIBLE_NOW
        heapq.heappush(self.visible.setdefault(tenant, []), (self.seq[job], job))


    # -- the receive ---------------------------------------------------------------------
    def _ask(self, host: Host) -> None:
        """``Receiver.ask``: one receive, for a message per free slot and room for parking."""
        host.rx_token += 1
        host.rx, host.rx_want = RX_ASKED, self.rules.receive_size(len(host.free), host.parks)
        host.rx_short = bool(host.owed)  # owing a hand-off, it asks without a long poll
        self.counts["receives"] += 1
        self.counts["calls"] += CALLS["receive"]
        self._push(host.clock + self.policy.receive_seconds / 2, SERVE, host.index,
                   host.rx_token)

    def _serve(self, host: Host, now: float) -> None:
        """SQS has the receive: take what is visible, else long-poll for it.

        A receive asked while the parent owed a hand-off does not wait: it
        comes back empty at once and the parent pays what it owes. Without a
        long poll (``poll_seconds`` 0) the worker asks again at once for as
        long as nothing comes, which is a poll without end: the receive waits
        for a message here too, and comes back empty only for a parent that
        owes a hand-off.
        """
        batch = self._take(host.rx_want)
        poll = self.policy.poll_seconds
        if batch or host.rx_short or (poll <= 0 and host.owed):
            self._answer(host, now, batch)
        else:
            host.rx = RX_WAIT
            if poll > 0:
                host.rx_end = now + poll
                self._push(host.rx_end, POLL_END, host.index, host.rx_token)

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
            if host.rx == RX_WAIT:
                batch = self._take(host.rx_want)
                if batch:
                    self._answer(host, now, batch)

    def _poll_ended(self, host: Host, now: float) -> None:
        """The long poll came back empty: to an idle parent owing nothing, that only means
        the next ask and its poll (and the next...: a chain); else the parent takes it."""
        if host.owed or host.state != IDLE or host.done or not self.left or \
                (self.policy.borrow and self._turns(host)):
            self._answer(host, now, [])
            return
        host.rx, host.rx_end = RX_CHAIN, now + self.policy.receive_seconds
        self.counts["receives"] += 1
        self.counts["calls"] += CALLS["receive"]

    def _unchain(self, host: Host, at: float) -> None:
        """Where a chain of empty polls that began with the one reaching SQS at ``rx_end``
        is at *at*: polling (until when), or its next ask on the way. Counts its receives."""
        if host.rx != RX_CHAIN:
            return
        poll = self.policy.poll_seconds
        period = poll + self.policy.receive_seconds
        host.rx_token += 1
        if at < host.rx_end:
            host.rx = RX_ASKED
            self._push(host.rx_end, SERVE, host.index, host.rx_token)
            return
        polls = int((at - host.rx_end) // period)
        base = host.rx_end + polls * period
        if at - base >= poll:  # between two polls: the next ask is on its way
            polls += 1
            host.rx = RX_ASKED
            self._push(base + period, SERVE, host.index, host.rx_token)
        else:
            host.rx, host.rx_end = RX_WAIT, base + poll
            self._push(host.rx_end, POLL_END, host.index, host.rx_token)
        self.counts["receives"] += polls
        self.counts["calls"] += polls * CALLS["receive"]

    def _answer(self, host: Host, now: float, batch: list[int]) -> None:
        host.rx, host.rx_result = RX_BACK, batch
        self._push(now + self.policy.receive_seconds / 2, ANSWER, host.index, host.rx_token)

