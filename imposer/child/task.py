"""One job inside a pool child: download, impose, upload, report an Outcome.

This code touches S3 only, through the storage adapter; the queue and the
lease state belong to the parent. It never raises: every failure becomes an
Outcome whose fate follows from the exception class.

Nothing a message says is opened as a local path: the layout is a built-in
preset by name, an inline spec, or a file under the tenant's S3 prefix
downloaded into the job's own directory.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from imposer.aws.s3 import Storage
from imposer.child.ceiling import ceiling
from imposer.child.fence import Fence
from imposer.errors import (
    InvalidMessage,
    JobError,
    LayoutError,
    LeaseExpired,
    LicenceUnavailable,
    PermanentJobError,
    StorageError,
    TooLarge,
)
from imposer.logs import extra
from imposer.models import Fate, JobRequest, Outcome, S3Uri, TaskSpec, parse_json
from imposer.settings import Settings

logger = logging.getLogger(__name__)

#: Largest layout file read from S3.
MAX_LAYOUT_BYTES = 64 * 1024
#: Pauses before a failed upload is tried again: the plate is made and on disk, so a bad
#: moment of S3 (beyond botocore's own retries) should not cost the job an attempt.
UPLOAD_PAUSES = (1.0, 2.0, 4.0)


def _scrubbed(exc: Exception, workdir: Path) -> Exception:
    """Say "the job's input" rather than a worker's temp path in a reason a tenant reads."""
    text = str(exc).replace(str(workdir / "input.pdf"), "the input PDF")
    text = text.replace(str(workdir / "plate.pdf"), "the plate").replace(str(workdir), "<job>")
    return exc if text == str(exc) else type(exc)(text)


class TaskRunner:
    """Run jobs in this child; the S3 client is made once per child.

    *fence* (``imposer.child.fence``) stops a job whose lease ran out; a
    runner made without one (tests, the CLI's one-off runs) is never fenced.
    """

    def __init__(self, settings: Settings, fence: Fence | None = None) -> None:
        self.settings, self.fence = settings, fence
        self._storage: Storage | None = None
        #: Set after a MemoryError: this process should be replaced, not reused.
        self.spent = False

    @property
    def storage(self) -> Storage:
        if self._storage is None:
            self._storage = Storage(self.settings.region)
        return self._storage

    def run(self, spec: TaskSpec) -> Outcome:
        req = spec.request
        timings: dict[str, float] = {}
        began = time.monotonic()
        workdir = Path(spec.workdir) / f"{req.job_id}-{spec.epoch}"
        if self.fence is not None:
            self.fence.begin(spec.owner, req.tenant_id, req.job_id)
        try:
            return self._attempt(spec, workdir, timings, began)
        finally:
            if self.fence is not None:
                self.fence.end()

    def _attempt(self, spec: TaskSpec, workdir: Path, timings: dict[str, float],
                 began: float) -> Outcome:
        req = spec.request
        try:
            workdir.mkdir(parents=True, exist_ok=True)
            try:
                summary = self._run(spec, workdir, timings)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            pace = self.settings.pace_seconds - (time.monotonic() - began)
            if pace > 0:
                time.sleep(pace)
            return Outcome(job_id=req.job_id, fate=Fate.SUCCEEDED, timings=timings,
                           output_bytes=summary.get("bytes"), sheets=summary.get("sheets"),
                           warnings=summary.get("warnings", ()))
        except MemoryError:
            self.spent = True
            return self._failed(req, TooLarge(
                f"the job needed more than the slot's memory ceiling of "
                f"{self.settings.memory_limit_mb:g} MB"), timings)
        except (JobError, InvalidMessage) as exc:
            # when the fence killed the tool, that (not the tool) ended the job
            failure = LeaseExpired(self.fence.reason()) if self._fenced() else exc
            return self._failed(req, _scrubbed(failure, workdir), timings)
        except Exception as exc:  # a bug or an unexpected library error: retry, counted
            if self._fenced():
                return self._failed(req, LeaseExpired(self.fence.reason()), timings)
            logger.exception("job %s crashed in the pool", req.job_id,
                             extra=extra("task_crashed", req.tenant_id, req.job_id))
            return Outcome(job_id=req.job_id, fate=Fate.RETRY, timings=timings,
                           reason=f"internal error: {type(exc).__name__}: {exc}",
                           error_kind="internal")

    def _fenced(self) -> bool:
        return self.fence is not None and self.fence.tripped

    def _step(self) -> None:
        """Between a job's steps: stop here if its lease ran out."""
        if self.fence is not None:
            self.fence.check()

    def _failed(self, req: JobRequest, exc: JobError, timings: dict) -> Outcome:
        if isinstance(exc, (LicenceUnavailable, LeaseExpired)):
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

    def _run(self, spec: TaskSpec, workdir: Path, timings: dict[str, float]) -> dict[str, Any]:
        from imposer.engine import load_layout

        req = spec.request
        t0 = time.monotonic()
        source = workdir / "input.pdf"
        self.storage.download(S3Uri.parse(req.input), source,
                              max_bytes=int(self.settings.max_input_mb * 1024 * 1024))
        layout = load_layout(self._layout_source(req.layout, workdir))
        timings["download"] = round(time.monotonic() - t0, 4)
        self._step()
        t1 = time.monotonic()
        plate = workdir / "plate.pdf"
        summary = self._impose(spec, layout, source, plate, workdir)
        timings["impose"] = round(time.monotonic() - t1, 4)
        self._step()
        t2 = time.monotonic()
        size = self._upload(spec, plate)
        timings["upload"] = round(time.monotonic() - t2, 4)
        return {"bytes": size, **summary}

    def _upload(self, spec: TaskSpec, plate: Path) -> int:
        """Upload the plate to the attempt's key, trying again while S3 fails."""
        req, uri = spec.request, S3Uri.parse(spec.upload_to)
        for pause in UPLOAD_PAUSES:
            try:
                return self.storage.upload(plate, uri, epoch=spec.epoch)
            except StorageError as exc:
                logger.warning("upload of job %s failed (%s); trying again in %.0fs",
                               req.job_id, exc, pause,
                               extra=extra("upload_retry", req.tenant_id, req.job_id))
                time.sleep(pause)
        return self.storage.upload(plate, uri, epoch=spec.epoch)

    def _layout_source(self, layout: Any, workdir: Path) -> Any:
        """Turn the message's layout into what load_layout takes: never a local path.

        ``{"preset": NAME}`` stays a dict, which load_layout checks against
        the built-in presets by name; an inline spec stays a dict; an s3:// URI
        (checked to lie under the tenant's prefix) is downloaded and parsed
        within size and depth limits.
        """
        if isinstance(layout, dict):
            return layout
        path = workdir / "layout.json"
        try:
            self.storage.download(S3Uri.parse(layout), path, max_bytes=MAX_LAYOUT_BYTES)
        except JobError as exc:
            if exc.kind == "bad_pdf":  # the download helper's word for "not there"
                raise LayoutError(f"layout file {layout}: {exc}") from None
            raise
        try:
            return parse_json(path.read_bytes(), what=f"layout file {layout}",
                              max_bytes=MAX_LAYOUT_BYTES)
        except InvalidMessage as exc:
            raise LayoutError(str(exc)) from None

    def _impose(self, spec: TaskSpec, layout, source: Path, plate: Path,
                workdir: Path) -> dict[str, Any]:
        req = spec.request
        if self.settings.engine == "open":
            from imposer.engine import impose

            with ceiling(self.settings.memory_limit_mb):
                summary = impose(layout, source, plate,
                                 slug_fields={"job_id": req.job_id, "tenant_id": req.tenant_id})
            return {"sheets": summary.sheets, "warnings": tuple(summary.warnings)}
        from imposer.engine.pdftoolbox import build_command, run_tool

        if not layout.pdftoolbox_profile:
            raise LayoutError("layout has no pdftoolbox profile; use --engine open or add one")
        command = build_command(self.settings.pdftoolbox, self.settings.pdftoolbox_args,
                                layout.pdftoolbox_profile, source, plate,
                                layout.pdftoolbox_variables)
        result = run_tool(command, timeout=spec.timeout,
                          memory_limit_mb=self.settings.memory_limit_mb, cwd=workdir,
                          tenant_id=req.tenant_id, job_id=req.job_id, owner=spec.owner)
        logger.info("pdfToolbox finished job %s in %.2fs (exit %s, peak %.0f MB)", req.job_id,
                    result.seconds, result.returncode, result.peak_rss_mb,
                    extra=extra("tool_done", req.tenant_id, req.job_id))
        return {}
