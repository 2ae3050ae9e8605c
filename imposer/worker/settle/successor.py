"""Launch the job a release handed its slot to (the promise ``promise`` made, kept).

The release that ends a job may start a parked job in the slot it frees, in
the same transaction (``LeaseStore.hand_over``). The job then holds a lease;
this launches it in the pool, or, when it cannot run here now, gives its
lease and its message back, so nothing holds a slot that runs nothing.
"""

from __future__ import annotations

from typing import Callable

from imposer.clock import Clock
from imposer.logs import guard
from imposer.metrics import Metrics
from imposer.worker.dispatch.borrowing import BorrowPolicy
from imposer.worker.dispatch.handoff import HandOff
from imposer.worker.dispatch.launch import Launcher
from imposer.worker.dispatch.pool import Pool
from imposer.worker.messages import Messages
from imposer.worker.settle.completion import Handed


class Successors:
    """Start the job each hand-over gave a slot to, or give it back."""

    def __init__(self, *, handoff: HandOff, pool: Pool, borrowing: BorrowPolicy,
                 launcher: Launcher, messages: Messages, metrics: Metrics,
                 clock: Clock) -> None:
        self.handoff, self.pool, self.borrowing, self.launcher = handoff, pool, borrowing, launcher
        self.messages, self.metrics, self.clock = messages, metrics, clock

    def start(self, handed: Handed, slot: int, stopping: Callable[[], bool]) -> bool:
        """After the settling job's release: launch the job its slot was handed to.

        False when the hand-over was refused (the note was taken elsewhere, or
        the tenant is over a lowered cap): the slot is then free as after any
        release. A handed job the worker cannot launch now (it is stopping, its
        message is gone, or, borrowed, the borrow rule no longer allows it) has
        its lease given back.
        """
        note, successor = handed.handover.note, handed.handover.successor
        self.handoff.taken(note)
        if not handed.committed:  # most likely another host took the note: the rest of that
            self.handoff.forget(note.tenant_id)  # read is as stale; the next hand-off reads anew
            return False
        request, lease, message = successor.request, successor.lease, note.message
        received_at = self.clock.monotonic()
        with guard(request):
            free = self.pool.free()
            why = "the worker is stopping" if stopping() else None if free else "no free slot"
            if why is None and lease.borrowed:
                # the borrow rule again: a release tried again after an AWS error may find
                # the reserve taken meanwhile
                why = self.borrowing.allows(request.tenant_id, len(free))
            if slot in free:
                free = [slot]
            if why is not None:
                self.launcher.unwind(lease, why)
                self.messages.give_back(message)
                return True
            if self.messages.due(message):
                held = self.messages.hold(message)
                if held is None:
                    self.launcher.unwind(lease, "its parked message is gone")
                    return True
                message = held
            if self.launcher.launch(request, message, free, lease, received_at=received_at):
                self.metrics.emit("borrowed" if lease.borrowed else "handed_off", 1,
                                  tenant_id=request.tenant_id)
        return True
