"""The demo's live view: who holds which slots, redrawn in place on a terminal.

On a terminal it redraws a small table (at most 100 columns) every tick; when
stdout is not a terminal (a log, CI) it prints one short line per tick instead.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Sequence

from imposer.worker.threads.periodic import Periodic

WIDTH = 100


class LiveView:
    """Show, per tenant, slots held, jobs waiting and jobs done, every *tick* seconds."""

    def __init__(self, held: Callable[[], dict[str, int]], done: Callable[[], dict[str, int]],
                 submitted: dict[str, list], tenants: Sequence[str], slots: int, cap: int,
                 tick: float, echo: Callable[..., None], tty: bool | None = None,
                 began: float | None = None) -> None:
        self.held, self.done, self.submitted = held, done, submitted
        self.tenants, self.slots, self.cap, self.echo = tenants, slots, cap, echo
        self.tty = sys.stdout.isatty() if tty is None else tty
        self._drawn = 0
        self._began = time.monotonic() if began is None else began
        self._thread = Periodic("live-view", tick, self.draw)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._thread.stop(5)
        self.draw()

    def rows(self) -> list[tuple[str, int, int, int]]:
        """(tenant, running, waiting, done) for every tenant, from the stack's own state."""
        held, done = self.held(), self.done()
        out = []
        for tenant in self.tenants:
            total = len(self.submitted.get(tenant, []))
            running, finished = held.get(tenant, 0), done.get(tenant, 0)
            out.append((tenant, running, max(0, total - running - finished), finished))
        return out

    def draw(self) -> None:
        rows = self.rows()
        elapsed = time.monotonic() - self._began
        if not self.tty:
            parts = [f"{t.removeprefix('quiet-')[:14]} {r}/{w}/{d}" for t, r, w, d in rows]
            self.echo(f"[{elapsed:5.1f}s] run/wait/done: " + " | ".join(parts))
            return
        busy = sum(r for _, r, _, _ in rows)
        lines = [f"  {elapsed:5.1f}s  {busy} of {self.slots} slots busy; cap {self.cap} per "
                 f"tenant  (# running, . free slot of its cap)",
                 f"  {'TENANT':16} {'SLOTS HELD':{self.cap + 2}} {'RUNNING':>7} {'WAITING':>7} "
                 f"{'DONE':>5}"]
        for tenant, running, waiting, finished in rows:
            bar = "#" * running + "." * max(0, self.cap - running)
            lines.append(f"  {tenant:16} [{bar}] {running:>7} {waiting:>7} {finished:>5}")
        text = "\n".join(line[:WIDTH] for line in lines)
        if self._drawn:
            self.echo(f"\x1b[{self._drawn}F\x1b[J", nl=False)
        self.echo(text)
        self._drawn = len(lines)
