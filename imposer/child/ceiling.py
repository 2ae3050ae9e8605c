"""The open engine's memory ceiling: this process's address space, capped while it imposes."""

from __future__ import annotations

import contextlib
import resource
from typing import Iterator


@contextlib.contextmanager
def ceiling(megabytes: float) -> Iterator[None]:
    """Cap this process's address space at *megabytes* while the block runs.

    Only around the open engine's imposition, which runs in this process (a
    bomb fails there with MemoryError, which the engine reports as too_large);
    downloads and uploads, whose threads need stacks, run without it, and
    pdfToolbox's own process tree is watched by the psutil RSS watchdog
    instead. The hard limit never changes, so the soft one comes back up.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = int(megabytes * 1024 * 1024)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
