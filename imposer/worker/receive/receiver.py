"""The SQS long poll, in a thread of the parent, so the loop sees children finish meanwhile.

With the poll on the loop's own thread, a job that ended during a poll was
collected (its slot settled, its tenant's parked work handed the slot) only
when the poll returned: up to ``IMPOSER_POLL_SECONDS`` of a licensed slot
idle per job. Here the loop asks for messages and goes on waiting on the
pool's pipes and on this thread's wake-up pipe together; whichever comes
first is handled first. Only one receive is ever in flight, asked for one
message per free slot and room for parking (``policy.receive_size``); a
message that finds no slot is parked (its tenant is at its cap) or given back
at once, so the parent never sits on work another host could start.
"""

from __future__ import annotations

import os
import threading

import attrs

from imposer.aws.sqs import JobQueue
from imposer.clock import Clock
from imposer.errors import BackendError
from imposer.models import Received


class Receiver(threading.Thread):
    """Receive on request; hand the result to the loop through ``take``."""

    def __init__(self, queue: JobQueue, poll_seconds: int, visibility: float,
                 clock: Clock) -> None:
        super().__init__(name="receiver", daemon=True)
        self.queue, self.poll_seconds, self.visibility = queue, poll_seconds, visibility
        self.clock = clock
        self._lock = threading.Condition()
        self._want = 0
        self._poll = True
        self._busy = False
        self._stopping = False
        self._result: list[Received] | BackendError | None = None
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)

    @property
    def wake_fd(self) -> int:
        """Readable when a result is waiting: wait on it beside the pool's pipes."""
        return self._read

    @property
    def busy(self) -> bool:
        """True while a receive is asked for or in flight, or its result not yet taken."""
        with self._lock:
            return self._busy

    def ask(self, count: int, poll: bool = True) -> bool:
        """Start a receive of up to *count* messages; False if one is still outstanding.

        With *poll* False it does not wait for messages to arrive: an empty
        queue answers at once (the loop owes a hand-off it pays on "empty").
        """
        with self._lock:
            if self._busy or self._stopping or count < 1:
                return False
            self._busy, self._want, self._poll = True, count, poll
            self._lock.notify()
        if self.ident is None:  # the first ask starts the thread (a loop driven by hand)
            self.start()
        return True

    def look(self, count: int) -> list[Received]:
        """Receive up to *count* messages now, on the caller's thread, without waiting.

        The parent's look at the queue before it hands a host's last free slot
        to a capped tenant's parked job (``Settler.promise_slot``); only while
        no receive of this thread is outstanding (``busy``).
        """
        asked = self.clock.time()
        return [attrs.evolve(m, visible_until=asked + self.visibility)
                for m in self.queue.receive(count, 0, self.visibility)]

    def take(self) -> list[Received] | None:
        """The finished receive's messages (None while it runs); raise its BackendError."""
        with self._lock:
            if not self._busy or self._result is None:
                return None
            result, self._result, self._busy = self._result, None, False
        try:
            os.read(self._read, 64)
        except BlockingIOError:
            pass
        if isinstance(result, BackendError):
            raise result
        return result

    def run(self) -> None:
        while True:
            with self._lock:
                while not self._stopping and not (self._busy and self._result is None
                                                  and self._want):
                    self._lock.wait()
                if self._stopping:
                    return
                want, self._want = self._want, 0
                wait = self.poll_seconds if self._poll else 0
            asked = self.clock.time()  # the messages stay invisible at least until then + TTL
            try:
                got: list[Received] | BackendError = [
                    attrs.evolve(m, visible_until=asked + self.visibility)
                    for m in self.queue.receive(want, wait, self.visibility)]
            except BackendError as exc:
                got = exc
            except Exception as exc:  # never leave the loop waiting on a receive that died
                got = BackendError(f"receive failed: {type(exc).__name__}: {exc}")
            with self._lock:
                self._result = got
            os.write(self._write, b"x")

    def stop(self, timeout: float | None = None) -> list[Received]:
        """Stop asking; wait up to *timeout* s for a poll in flight (by default as long as
        one may take: the long poll and 5 s); return what it received."""
        timeout = self.poll_seconds + 5 if timeout is None else timeout
        with self._lock:
            self._stopping = True
            self._lock.notify()
        if self.is_alive():
            self.join(timeout)
        with self._lock:
            result, self._result = self._result, None
        return result if isinstance(result, list) else []
