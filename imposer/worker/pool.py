"""A fixed pool of worker processes, one per slot, each wrapping one job at a time.

Unlike ``multiprocessing.Pool`` (a dead worker's task never returns) or
``ProcessPoolExecutor`` (one death breaks the pool), each slot here owns its
process and pipe, so the parent knows exactly which job a dead child held,
releases that job's lease, and starts a fresh child in the same slot.
Children come from a ``forkserver`` context: never forked from a parent that
already runs threads and boto3 clients.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
from typing import Any

import attrs
import psutil

from imposer.child.main import child_main
from imposer.logs import extra

logger = logging.getLogger(__name__)


@attrs.define
class _Slot:
    index: int
    process: Any = None
    conn: Any = None
    busy: bool = False


@attrs.frozen(kw_only=True)
class Event:
    """A slot finished a job (``outcome``) or its child died (``exitcode``)."""

    slot: int
    outcome: Any = None
    exitcode: int | None = None


class Pool:
    """*size* long-lived children; ``submit`` to a free slot, ``wait`` for events."""

    def __init__(self, size: int, settings, context: str = "forkserver") -> None:
        self.settings = settings
        self.ctx = multiprocessing.get_context(context)
        if context == "forkserver":
            self.ctx.set_forkserver_preload(["imposer.child.main", "imposer.child.task"])
        self.slots = [_Slot(i) for i in range(size)]

    def start(self) -> None:
        for slot in self.slots:
            self._spawn(slot)

    def _spawn(self, slot: _Slot) -> None:
        parent_end, child_end = self.ctx.Pipe()
        proc = self.ctx.Process(target=child_main, args=(child_end, self.settings),
                                name=f"imposer-slot-{slot.index}", daemon=True)
        proc.start()
        child_end.close()
        slot.process, slot.conn, slot.busy = proc, parent_end, False

    def free(self) -> list[int]:
        return [s.index for s in self.slots if not s.busy]

    def busy_count(self) -> int:
        return sum(s.busy for s in self.slots)

    def submit(self, index: int, spec: Any) -> None:
        slot = self.slots[index]
        assert not slot.busy, f"slot {index} is busy"
        slot.busy = True
        slot.conn.send(spec)

    def wait(self, timeout: float) -> list[Event]:
        """Block up to *timeout* s for finished jobs or dead children."""
        watch: dict[Any, tuple[_Slot, str]] = {}
        for slot in self.slots:
            watch[slot.conn] = (slot, "conn")
            watch[slot.process.sentinel] = (slot, "dead")
        ready = multiprocessing.connection.wait(list(watch), timeout)
        events, seen = [], set()
        for obj in ready:
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
        self._spawn(slot)
        return Event(slot=slot.index, exitcode=code if code is not None else -1) if was_busy \
            else Event(slot=slot.index, exitcode=None)

    def kill(self, index: int) -> None:
        """Stop slot *index*'s child and its whole process tree, then replace it."""
        slot = self.slots[index]
        _stop_child(slot.process)
        slot.conn.close()
        self._spawn(slot)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask idle children to exit; kill any that do not, with their trees."""
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
