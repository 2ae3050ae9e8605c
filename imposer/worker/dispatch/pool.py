"""A fixed pool of worker processes, one per slot, each wrapping one job at a time.

Unlike ``multiprocessing.Pool`` (a dead worker's task never returns) or
``ProcessPoolExecutor`` (one death breaks the pool), each slot here owns its
process and pipe, so the parent knows exactly which job a dead child held,
releases that job's lease, and starts a fresh child in the same slot.
Children come from a ``forkserver`` context: never forked from a parent that
already runs threads and boto3 clients.

A child that dies (or is killed) cannot clean up after itself, so the pool
does: it kills the tools the child's slot started (found by their owner tag)
and empties the slot's work directory, before a fresh child takes the slot.
At start it does the same for whatever an earlier run of this host left,
once that run's parent process is gone.

Each slot shares one number with its child: the time by which the running
job's tools must stop, its lease's expiry less a tenth of the TTL, moved on
by every renewal (``fence``; the child's side is ``imposer.child.fence``).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import attrs
import psutil

from imposer.child import cleanup
from imposer.child.main import child_main
from imposer.logs import extra
from imposer.settings import Settings

logger = logging.getLogger(__name__)


@attrs.define
class _Slot:
    index: int
    process: Any = None
    conn: Any = None
    busy: bool = False
    #: Shared with the child: ``time.monotonic()`` by which its job's tools must stop.
    deadline: Any = None
    #: Fencing epoch of the job last sent, whose renewals may move the deadline.
    epoch: str | None = None


@attrs.frozen(kw_only=True)
class Event:
    """A slot finished a job (``outcome``) or its child died (``exitcode``)."""

    slot: int
    outcome: Any = None
    exitcode: int | None = None


class Pool:
    """*size* long-lived children; ``submit`` to a free slot, ``wait`` for events."""

    def __init__(self, size: int, settings: Settings, context: str = "forkserver") -> None:
        self.settings = settings
        self.ctx = multiprocessing.get_context(context)
        if context == "forkserver":
            self.ctx.set_forkserver_preload(["imposer.child.main", "imposer.child.task"])
        self.slots = [_Slot(i, deadline=self.ctx.RawValue("d", 0.0)) for i in range(size)]
        self._fence_lock = threading.Lock()
        self._cleared = False
        #: This run of the host, named after this process: tools and directories of runs
        #: whose process is gone are leftovers.
        self.boot = cleanup.boot_id(psutil.Process())
        self.host = settings.host_id
        self.root = settings.work_root / self.host.replace("/", "_")

    def clear_leftovers(self) -> None:
        """Kill the tools and remove the work dirs of earlier runs of this host that are gone.

        The worker does this first thing at boot, before it waits for AWS: a
        helper that outlived a killed run (detached from its tool) must stop
        before the lease it ran under can be reclaimed and its job run again.
        """
        killed = cleanup.kill_previous_runs(self.host, self.boot)
        removed = cleanup.remove_previous_runs(self.root, self.boot)
        self._cleared = True
        if killed or removed:
            logger.warning("cleared an earlier run of host %s: %s tool process(es) killed, "
                           "%s work dir(s) removed", self.host, killed, removed,
                           extra=extra("leftovers_cleared", killed=killed, removed=removed))

    def start(self) -> None:
        """Start every child, after clearing earlier runs' leftovers if not done yet."""
        if not self._cleared:
            self.clear_leftovers()
        for slot in self.slots:
            self.slot_dir(slot.index).mkdir(parents=True, exist_ok=True)
            self._spawn(slot)

    def slot_dir(self, index: int) -> Path:
        """Where slot *index* keeps its jobs' files in this run."""
        return self.root / self.boot / f"slot-{index}"

    def owner(self, index: int) -> str:
        """The tag slot *index*'s tools carry, so they can be found if its child dies."""
        return cleanup.owner_tag(self.host, self.boot, index)

    def has_result(self, index: int) -> bool:
        """Say whether slot *index*'s child already sent a result that is waiting to be read."""
        slot = self.slots[index]
        try:
            return slot.busy and slot.conn.poll()
        except (OSError, EOFError):
            return False

    def _spawn(self, slot: _Slot) -> None:
        parent_end, child_end = self.ctx.Pipe()
        proc = self.ctx.Process(target=child_main, args=(child_end, self.settings, slot.deadline),
                                name=f"imposer-slot-{slot.index}", daemon=True)
        proc.start()
        child_end.close()
        slot.process, slot.conn, slot.busy = proc, parent_end, False

    def free(self) -> list[int]:
        return [s.index for s in self.slots if not s.busy]

    def busy_count(self) -> int:
        return sum(s.busy for s in self.slots)

    @property
    def size(self) -> int:
        """The slots of this pool (``IMPOSER_SLOTS``)."""
        return len(self.slots)

    def submit(self, index: int, spec: Any, run_for: float) -> None:
        """Send *spec* to slot *index*'s child, replacing (once) a child that died idle.

        *run_for* is how many seconds the job's tools may run (its lease's time
        left less the fence margin, ``LeaseTiming.tools_may_run``): they stop
        then, unless ``fence`` moves it on. A child
        can die between the loop's last look at the pool and this send; the
        job never reached it, so it goes to a fresh child, no failure.
        """
        slot = self.slots[index]
        assert not slot.busy, f"slot {index} is busy"
        with self._fence_lock:
            slot.epoch = spec.epoch
            slot.deadline.value = time.monotonic() + run_for
        if not slot.process.is_alive():
            self._replace_idle(slot)
        slot.busy = True
        try:
            slot.conn.send(spec)
        except (OSError, EOFError):  # BrokenPipeError, ConnectionResetError
            self._replace_idle(slot)
            slot.busy = True
            slot.conn.send(spec)

    def fence(self, index: int, epoch: str, run_for: float) -> None:
        """A renewal lets attempt *epoch* in slot *index* run *run_for* more seconds.

        Ignored once the slot was given another job; a renewal that lands
        after its job's child reported is ignored by the child (no job runs).
        """
        slot = self.slots[index]
        with self._fence_lock:
            if slot.epoch == epoch:
                slot.deadline.value = time.monotonic() + run_for

    def _replace_idle(self, slot: _Slot) -> None:
        _stop_child(slot.process)  # (a pipe that broke under a live child: it goes too)
        code = slot.process.exitcode
        logger.warning("pool child of slot %s died while idle (exit code %s); replacing it "
                       "before it takes a job", slot.index, code,
                       extra=extra("idle_child_replaced", slot=slot.index, exitcode=code))
        slot.conn.close()
        self._clear(slot)
        self._spawn(slot)

    def wait(self, timeout: float, wake: Sequence[int] = ()) -> list[Event]:
        """Block up to *timeout* s for finished jobs or dead children, or a *wake* fd."""
        watch: dict[Any, tuple[_Slot, str]] = {}
        for slot in self.slots:
            watch[slot.conn] = (slot, "conn")
            watch[slot.process.sentinel] = (slot, "dead")
        ready = multiprocessing.connection.wait([*watch, *wake], timeout)
        events, seen = [], set()
        for obj in ready:
            if obj not in watch:
                continue  # a wake-up: the caller looks at what woke it
            slot, kind = watch[obj]
            if slot.index in seen:
                continue
            if kind == "conn" or slot.conn.poll():
                try:
                    outcome = slot.conn.recv()
                except (EOFError, OSError):
                    outcome = None
                if outcome is not None:
                    seen.add(slot.index)
                    slot.busy = False
                    events.append(Event(slot=slot.index, outcome=outcome))
                    continue
            seen.add(slot.index)
            events.append(self._died(slot))
        return events

    def _died(self, slot: _Slot) -> Event:
        slot.process.join(timeout=5)
        code = slot.process.exitcode
        logger.error("pool child of slot %s died (exit code %s); replacing it", slot.index, code,
                     extra=extra("child_died", slot=slot.index, exitcode=code))
        was_busy = slot.busy
        self._clear(slot)
        self._spawn(slot)
        return Event(slot=slot.index, exitcode=code if code is not None else -1) if was_busy \
            else Event(slot=slot.index, exitcode=None)

    def kill(self, index: int) -> None:
        """Stop slot *index*'s child and its whole process tree, then replace it."""
        slot = self.slots[index]
        _stop_child(slot.process)
        slot.conn.close()
        self._clear(slot)
        self._spawn(slot)

    def _clear(self, slot: _Slot) -> None:
        """Kill the tools a dead child left running and empty its slot's directory."""
        cleanup.kill_slot_tools(self.host, self.boot, slot.index)
        cleanup.empty_dir(self.slot_dir(slot.index))

    def stop(self, timeout: float = 5.0) -> list[Event]:
        """Ask idle children to exit; kill any that do not, with their trees.

        Return the results that busy children had already sent: a job that
        finished just before the stop is collected, not killed and re-run.
        """
        events = []
        for slot in self.slots:
            if slot.busy and self.has_result(slot.index):
                try:
                    events.append(Event(slot=slot.index, outcome=slot.conn.recv()))
                    slot.busy = False
                except (EOFError, OSError):
                    pass
        for slot in self.slots:
            try:
                if not slot.busy:
                    slot.conn.send(None)
            except OSError:
                pass
        for slot in self.slots:
            slot.process.join(timeout=timeout if not slot.busy else 0)
            if slot.process.is_alive():
                _stop_child(slot.process)
            slot.conn.close()
        cleanup.kill_tools(lambda tag: tag.startswith(cleanup.owner_tag(self.host, self.boot)))
        shutil.rmtree(self.root / self.boot, ignore_errors=True)
        return events


def _stop_child(process, grace: float = 3.0) -> None:
    """SIGTERM first (the child unwinds and its tool wrapper kills the tool), then SIGKILL."""
    if process.is_alive():
        process.terminate()
        process.join(timeout=grace)
    if process.is_alive():
        _kill_tree(process.pid)
        process.join(timeout=5)


def _kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)
