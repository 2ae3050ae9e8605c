"""Stop a job's tools when its lease runs out, whatever the parent is doing.

The lease says which attempt may run; the parent renews it. A parent that
is frozen (SIGSTOP, a swapping host) or cut off from DynamoDB cannot renew,
and once the lease expires the sweep on another host may start the job again
in its own slot: two pdfToolbox seats for one job, its tenant over its cap.
So a lease holder stops by itself: the parent writes, into memory it shares
with the slot's child, the monotonic time by which the child must stop (the
lease's expiry less a margin for clock skew between hosts), and moves it on
after every renewal. A thread in the child kills the job's tools (found by
their owner tag) when that time passes, and the job reports LeaseExpired:
requeued, not counted against it. The open engine runs in the child
itself; its job stops at the next step instead (no upload of its plate).

Only a job running in the child is fenced: a deadline the parent writes
after the child reported (a renewal that raced the result) finds no job.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from imposer.child import cleanup
from imposer.errors import LeaseExpired
from imposer.logs import extra

logger = logging.getLogger(__name__)

#: How often the thread looks at the deadline (seconds).
POLL_SECONDS = 0.25


class Fence:
    """The child's side: *deadline* is a shared ``double`` of ``time.monotonic()`` seconds."""

    def __init__(self, deadline: Any, poll: float = POLL_SECONDS) -> None:
        self.deadline, self.poll = deadline, poll
        self._lock = threading.Lock()
        self._job: tuple[str, str, str] | None = None  # owner tag, tenant, job
        self.tripped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="lease-fence", daemon=True)
        self._thread.start()

    def begin(self, owner: str, tenant_id: str, job_id: str) -> None:
        """A job starts in this child: fence its tools from now on."""
        with self._lock:
            self._job, self.tripped = (owner, tenant_id, job_id), False

    def end(self) -> None:
        with self._lock:
            self._job = None

    def check(self) -> None:
        """Raise LeaseExpired if the job may not go on (called between its steps)."""
        if self.tripped or self._past():
            self.tripped = True
            raise LeaseExpired(self.reason())

    def reason(self) -> str:
        return ("the attempt's lease ran out before the worker renewed it (host frozen or cut "
                "off from AWS); stopped so that it never runs twice at once")

    def _past(self) -> bool:
        deadline = self.deadline.value
        return deadline > 0 and time.monotonic() >= deadline

    def _watch(self) -> None:
        while True:
            time.sleep(self.poll)
            self.look()

    def look(self) -> bool:
        """Stop the running job's tools if its deadline passed; say whether this look did."""
        with self._lock:
            job = self._job
            if job is None or self.tripped or not self._past():
                return False
            self.tripped = True
        owner, tenant_id, job_id = job
        logger.error("lease of job %s/%s ran out before the worker renewed it; stopping its "
                     "tools", tenant_id, job_id, extra=extra("lease_fenced", tenant_id, job_id))
        cleanup.kill_tools(lambda tag: tag == owner, wait=False)
        return True
