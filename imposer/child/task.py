"""One job inside a pool child: download, impose, upload, report an Outcome.

This code touches S3 only, through the storage adapter; the queue and the
lease state belong to the parent. It never raises: every failure becomes an
Outcome whose fate follows from the exception class.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from imposer.errors import (
    JobError,
    LayoutError,
    LicenceUnavailable,
    PermanentJobError,
)
from imposer.logs import extra
from imposer.models import Fate, JobRequest, Outcome, S3Uri, TaskSpec

logger = logging.getLogger(__name__)


class TaskRunner:
    """Run jobs in this child; the S3 client is made once per child."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self._storage = None

    @property
    def storage(self):
        if self._storage is None:
            from imposer.aws.s3 import Storage

            self._storage = Storage(self.settings.region)
        return self._storage

    def run(self, spec: TaskSpec) -> Outcome:
        req = spec.request
        timings: dict[str, float] = {}
        began = time.monotonic()
        try:
            with tempfile.TemporaryDirectory(prefix=f"imposer-{req.job_id}-") as tmp:
                summary = self._run(spec, Path(tmp), timings)
            pace = self.settings.pace_seconds - (time.monotonic() - began)
            if pace > 0:
                time.sleep(pace)
            return Outcome(job_id=req.job_id, fate=Fate.SUCCEEDED, timings=timings,
                           output_bytes=summary.get("bytes"), sheets=summary.get("sheets"))
        except JobError as exc:
            return self._failed(req, exc, timings)
        except Exception as exc:  # a bug or an unexpected library error: retry, counted
            logger.exception("job %s crashed in the pool", req.job_id,
                             extra=extra("task_crashed", req.tenant_id, req.job_id))
            return Outcome(job_id=req.job_id, fate=Fate.RETRY, timings=timings,
                           reason=f"internal error: {type(exc).__name__}: {exc}",
                           error_kind="internal")

    def _failed(self, req: JobRequest, exc: JobError, timings: dict) -> Outcome:
        if isinstance(exc, LicenceUnavailable):
            fate = Fate.REQUEUE
        elif isinstance(exc, PermanentJobError):
            fate = Fate.FAILED
        else:  # transient: retried, counted toward dead-lettering
            fate = Fate.RETRY
        logger.warning("job %s failed (%s): %s", req.job_id, exc.kind, exc,
                       extra=extra("task_failed", req.tenant_id, req.job_id,
                                   error_kind=exc.kind, fate=fate.value))
        return Outcome(job_id=req.job_id, fate=fate, reason=str(exc), error_kind=exc.kind,
                       timings=timings)

    def _run(self, spec: TaskSpec, tmp: Path, timings: dict[str, float]) -> dict[str, Any]:
        from imposer.engine import load_layout

        req = spec.request
        t0 = time.monotonic()
        source = tmp / "input.pdf"
        self.storage.download(S3Uri.parse(req.input), source)
        layout = load_layout(self._layout_source(req.layout, tmp))
        timings["download"] = round(time.monotonic() - t0, 4)
        t1 = time.monotonic()
        plate = tmp / "plate.pdf"
        sheets = self._impose(spec, layout, source, plate, tmp)
        timings["impose"] = round(time.monotonic() - t1, 4)
        t2 = time.monotonic()
        size = self.storage.upload(plate, S3Uri.parse(req.output))
        timings["upload"] = round(time.monotonic() - t2, 4)
        return {"bytes": size, "sheets": sheets}

    def _layout_source(self, layout: Any, tmp: Path) -> Any:
        """Turn the message's layout (URI, {"preset": name} or inline spec) into a source."""
        if isinstance(layout, dict):
            if set(layout) == {"preset"}:
                return layout["preset"]
            return layout
        path = tmp / "layout.json"
        self.storage.download(S3Uri.parse(layout), path)
        try:
            return json.loads(path.read_text())
        except ValueError as exc:
            raise LayoutError(f"layout file {layout} is not JSON: {exc}") from None

    def _impose(self, spec: TaskSpec, layout, source: Path, plate: Path,
                tmp: Path) -> int | None:
        req = spec.request
        if self.settings.engine == "open":
            from imposer.engine import impose

            return impose(layout, source, plate).sheets
        from imposer.engine.pdftoolbox import build_command, run_tool

        if not layout.pdftoolbox_profile:
            raise LayoutError("layout has no pdftoolbox profile; use --engine open or add one")
        command = build_command(self.settings.pdftoolbox, self.settings.pdftoolbox_args,
                                layout.pdftoolbox_profile, source, plate,
                                layout.pdftoolbox_variables)
        result = run_tool(command, timeout=spec.timeout,
                          memory_limit_mb=self.settings.memory_limit_mb, cwd=tmp,
                          tenant_id=req.tenant_id, job_id=req.job_id)
        logger.info("pdfToolbox finished job %s in %.2fs (exit %s, peak %.0f MB)", req.job_id,
                    result.seconds, result.returncode, result.peak_rss_mb,
                    extra=extra("tool_done", req.tenant_id, req.job_id))
        return None
