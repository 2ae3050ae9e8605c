"""Leave nothing behind a pool child: its tools' processes and its job directories.

A child killed by SIGKILL (or a host that died) cannot run its own cleanup,
so the parent does it from outside: every tool process carries the
``IMPOSER_TOOL_OWNER`` tag of the slot that started it (``<host>/<boot>/<slot>``)
and every job directory sits under the slot's directory of this boot.

A boot is named after the parent process that runs it (``<pid>-<start>-<random>``),
so a booting worker clears only earlier runs whose parent is gone: never
those of another live worker that shares its host id on this machine. The
start time tells a reused pid from the parent itself.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

import psutil

from imposer.engine.pdftoolbox import OWNER
from imposer.logs import extra

logger = logging.getLogger(__name__)


def boot_id(parent: psutil.Process) -> str:
    """Name a run of a host after the process that runs it."""
    return f"{parent.pid}-{int(parent.create_time())}-{uuid.uuid4().hex[:8]}"


def run_alive(boot: str) -> bool:
    """Say whether the parent process of run *boot* still lives.

    A name without a parent (an imposer from before names had one) is an
    earlier run. The start time may differ by a second between two readings
    (the kernel's boot time is rounded), a reused pid's by far more.
    """
    try:
        pid, started, _ = boot.split("-")
        pid, started = int(pid), int(started)
    except ValueError:
        return False
    try:
        parent = psutil.Process(pid)
        return abs(parent.create_time() - started) <= 2 and \
            parent.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # not ours to look at: someone else's, and alive
        return True


def owner_tag(host: str, boot: str, slot: int | None = None) -> str:
    """Return the tag of a slot's tools, or the prefix of a whole boot's when slot is None."""
    return f"{host}/{boot}/" + ("" if slot is None else str(slot))


def kill_tools(matches, wait: bool = True) -> int:
    """SIGKILL every process whose owner tag satisfies *matches*; return how many.

    With *wait*, until they are gone; without, the killing process's own
    children are left for it to reap (the tool wrapper's wait sees the kill).
    """
    victims = []
    for proc in psutil.process_iter():
        try:
            tag = proc.environ().get(OWNER)
        except (psutil.Error, OSError):
            continue
        if tag and matches(tag):
            victims.append(proc)
    for proc in victims:
        try:
            proc.kill()
        except psutil.Error:
            pass
    if wait:
        psutil.wait_procs(victims, timeout=5)
    if victims:
        logger.warning("killed %d orphaned tool process(es)", len(victims),
                       extra=extra("orphans_killed", pids=[p.pid for p in victims]))
    return len(victims)


def kill_slot_tools(host: str, boot: str, slot: int) -> int:
    """Kill the tools a dead child of *slot* left running."""
    tag = owner_tag(host, boot, slot)
    return kill_tools(lambda t: t == tag)


def kill_previous_runs(host: str, boot: str) -> int:
    """At boot: kill tools started by earlier runs of this host whose parent is gone."""
    mine, ours = f"{host}/", owner_tag(host, boot)
    return kill_tools(lambda t: t.startswith(mine) and not t.startswith(ours)
                      and not run_alive(t[len(mine):].partition("/")[0]))


def empty_dir(path: Path) -> None:
    """Remove everything inside *path* (a dead slot's job directories)."""
    if path.is_dir():
        for child in path.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


def remove_previous_runs(root: Path, boot: str) -> int:
    """At boot: remove the work directories of this host's finished runs; return how many."""
    removed = 0
    if root.is_dir():
        for child in root.iterdir():
            if child.name != boot and not run_alive(child.name):
                shutil.rmtree(child, ignore_errors=True)
                removed += 1
    return removed
