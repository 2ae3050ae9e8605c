"""Tools beside the worker: submit a job as a tenant would, and the demo."""

from __future__ import annotations

import sys

import click

from imposer import logs
from imposer.cli.common import MAX_PDF_MB, InputFile, fail, settings_options
from imposer.models.exits import Exit
from imposer.settings import Settings


@click.command()
@click.option("--tenant", required=True, help="Tenant id (also the MessageGroupId).")
@click.option("--pdf", "pdf", required=True, type=InputFile(MAX_PDF_MB),
              help="Artwork PDF to impose.")
@click.option("--layout", required=True, help="Layout: a JSON file or a preset name.")
@click.option("--token", help="Idempotency token (default: the new job id).")
@click.option("--webhook", help="URL to POST the signed completion event to.")
@click.option("--priority", type=click.IntRange(0, 9),
              help="0 (most urgent) to 9 [default 5]. Orders only this tenant's own waiting "
                   "jobs: it never takes a slot from another tenant.")
@click.option("--due", metavar="TIME",
              help="Wanted-by time, ISO-8601 with a timezone (2027-01-15T09:00:00Z); among "
                   "jobs of equal priority the earliest due starts first. At most a year ahead.")
@click.option("--redis-url", envvar="IMPOSER_REDIS_URL",
              help="Redis for admission control [env IMPOSER_REDIS_URL]; none: no checks.")
@click.option("--no-check", is_flag=True,
              help="Skip imposing locally first (by default a layout or PDF the engine would "
                   "refuse is refused here, before anything is uploaded).")
@click.option("-v", "--verbose", is_flag=True, help="Log what the client does (JSON lines).")
@settings_options("region", "queue_name", "bucket")
def submit(settings: Settings, tenant, pdf, layout, token, webhook, priority, due, redis_url,
           no_check, verbose) -> None:
    """Upload a PDF under the tenant's prefix and publish one job (layer 1 + layer 3).

    The layout and PDF are first imposed locally with the open engine, so a
    job the worker would fail as bad input fails here, with the same words
    as `imposer impose`, and costs no upload.
    """
    from imposer.aws.session import check_endpoint
    from imposer.client import AdmissionError, AdmissionUnavailable, SubmitError
    from imposer.client import submit as client_submit

    if not verbose:
        logs.quiet()
    check_endpoint()  # the client would take a malformed one for a failed upload
    if not no_check:
        check_locally(layout, pdf)

    admission = None
    if redis_url:
        from imposer.client import Admission

        admission = Admission.from_url(redis_url)
    try:
        request = client_submit(tenant, pdf, layout, token=token, webhook=webhook,
                                admission=admission, bucket=settings.bucket,
                                queue=settings.queue_name, region=settings.region,
                                priority=priority, due=due)
    except AdmissionError as exc:
        fail(str(exc), exc.exit_code)
    except AdmissionUnavailable as exc:
        fail(f"{exc} (IMPOSER_REDIS_URL {redis_url})", exc.exit_code)
    except SubmitError as exc:
        fail(str(exc), getattr(exc, "exit_code", Exit.BACKEND))
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc), Exit.USAGE)
    click.echo(f"submitted job {request.job_id} for {tenant} (token {request.token})")
    click.echo(f"plate will be written to {request.output}")


def check_locally(layout: str, pdf: str) -> None:
    """Impose into a throw-away file; exit 2 with the engine's reason if it refuses."""
    import tempfile
    from pathlib import Path

    from imposer.cli.engine import layout_of
    from imposer.engine import impose, load_layout
    from imposer.errors import InputPdfError, LayoutError, TooLarge

    try:
        spec = load_layout(layout_of(layout))
        with tempfile.TemporaryDirectory(prefix="imposer-check-") as tmp:
            impose(spec, pdf, Path(tmp) / "plate.pdf")
    except (LayoutError, InputPdfError, TooLarge) as exc:
        fail(str(exc), Exit.USAGE, kind=exc.kind)



@click.command()
@click.option("--fast", is_flag=True, help="Same flow with short pacing (well under a minute).")
@click.option("--out", type=click.Path(file_okay=False), default="imposer-demo",
              show_default=True, help="Where the artwork, plates and worker log go.")
def demo(fast: bool, out: str) -> None:
    """Watch fairness happen: a noisy burst and three quiet tenants, no AWS needed.

    Starts an embedded AWS stack, submits 60 jobs from one tenant and 3 each
    from three quiet tenants seconds later, runs 8 slots with the open engine and
    shows who holds which slots. Uses Redis for admission control when a
    redis-server is installed (or IMPOSER_REDIS_URL is set).
    """
    from pathlib import Path

    from imposer.dev.demo import run_demo

    sys.exit(run_demo(fast, Path(out), click.echo))


