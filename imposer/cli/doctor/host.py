"""Doctor's checks of this host itself: the engine the worker runs and room for job files."""

from __future__ import annotations

import importlib
import os
import shutil

from imposer.cli.doctor.check import FAIL, OK, Check
from imposer.settings import Settings


def engine(s: Settings) -> Check:
    """The tool the worker runs must be there before a job reaches it."""
    if s.engine == "open":
        try:
            pikepdf = importlib.import_module("pikepdf")
            importlib.import_module("imposer.engine")
        except ImportError as exc:
            return Check(name="engine", status=FAIL, detail=f"open engine: {exc}")
        return Check(name="engine", status=OK,
                     detail=f"open engine (pikepdf {pikepdf.__version__})")
    path = shutil.which(s.pdftoolbox)
    if path is None or not os.access(path, os.X_OK):
        return Check(name="engine", status=FAIL, detail=(
            f"pdfToolbox not found or not executable at {s.pdftoolbox!r} (set "
            "IMPOSER_PDFTOOLBOX, or IMPOSER_ENGINE=open)"))
    return Check(name="engine", status=OK, detail=f"pdfToolbox at {path}")


def work_dir(s: Settings, min_free_mb: float) -> Check:
    """Job files live here: one job needs its input and its plate side by side."""
    root = s.work_root
    existing = next(p for p in (root, *root.parents) if p.exists())
    if not os.access(existing, os.W_OK):
        return Check(name="work dir", status=FAIL, detail=f"{existing} is not writable")
    free_mb = shutil.disk_usage(existing).free / 2**20
    detail = f"{root}: {free_mb / 1024:.1f} GiB free"
    if free_mb < min_free_mb:
        return Check(name="work dir", status=FAIL,
                     detail=f"{detail}; needs {min_free_mb / 1024:.1f} GiB")
    return Check(name="work dir", status=OK, detail=detail)
