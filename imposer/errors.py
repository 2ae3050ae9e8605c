"""One rooted exception hierarchy.

Permanent errors (bad input) and transient ones (throttling, licence busy)
are different classes because they lead to different fates for a message:
a permanent error fails the job at once, a transient one retries it.
"""


class ImposerError(Exception):
    """Anything imposer raises on purpose."""


class ConfigError(ImposerError):
    """A setting or an argument is wrong; the process cannot start."""


class BackendError(ImposerError):
    """An AWS service did not do what was asked."""


class EndpointUnreachable(BackendError):
    """The AWS endpoint cannot be reached (is `imposer local` running?)."""


class MissingResource(BackendError):
    """A table, queue or bucket does not exist (run `imposer init`)."""


class TransientBackendError(BackendError):
    """Throttling or a transaction conflict; the same call may succeed later."""


class ReplyLost(TransientBackendError):
    """A request went out but its reply was lost: it may well have taken effect."""


class AcquireUncertain(BackendError):
    """An acquire's transaction failed in a way that may hide a commit (a lost reply).

    ``leases`` are the leases it would have written (one, or a burst's): the
    caller releases them, which is a no-op if the transaction never committed.
    """

    def __init__(self, message: str, *leases: object) -> None:
        super().__init__(message)
        self.leases = leases


class LeaseLost(ImposerError):
    """Our lease was reclaimed or replaced: the fencing epoch no longer matches."""


class JobError(ImposerError):
    """A job cannot complete; the subclass says whether retrying may help."""

    #: Short machine-readable reason, stored on the job record.
    kind = "error"


class PermanentJobError(JobError):
    """Retrying cannot help: the input or the request is wrong."""

    kind = "permanent"


class InvalidMessage(PermanentJobError, ValueError):
    """An SQS message body is not a valid job request.

    Also a ValueError, so the tenant-side client (which shares only the models
    with the service) can refuse a bad request before publishing it.
    """

    kind = "invalid_message"


class SenderRefused(InvalidMessage):
    """The principal SQS says sent a message is not bound to the tenant the message names.

    Nothing is recorded under the named tenant: the sender chose the job id
    and the webhook URL, so a record could fail that tenant's real job of the
    same id, or sign an event with its secret for the sender's URL.
    """

    kind = "sender_refused"


class LayoutError(PermanentJobError):
    """A layout specification is malformed or cannot be satisfied."""

    kind = "bad_layout"


class InputPdfError(PermanentJobError):
    """The input PDF is corrupt, encrypted, empty or otherwise unusable."""

    kind = "bad_pdf"


class ResourceLimitExceeded(PermanentJobError):
    """The job's process tree went over its memory ceiling and was killed."""

    kind = "resource"


class TooLarge(PermanentJobError):
    """The input exceeds the engine's budget (pages, sheet area, objects, memory): it would
    take a slot for minutes and fail anyway, so it fails at once."""

    kind = "too_large"


class TransientJobError(JobError):
    """The attempt failed for a reason that may pass; the job is retried."""

    kind = "transient"


class LicenceUnavailable(TransientJobError):
    """pdfToolbox could not get its licence (exit 100); not the tenant's fault."""

    kind = "licence"


class LeaseExpired(TransientJobError):
    """The attempt's lease ran out before the parent renewed it (a frozen or cut-off host):
    its tools were stopped so the job never runs twice at once; not the tenant's fault."""

    kind = "lease_expired"


class ToolTimeout(TransientJobError):
    """The tool ran past the job timeout; its whole process tree was killed."""

    kind = "timeout"


class ToolConfigError(TransientJobError):
    """pdfToolbox rejected the call or its configuration (exit 101, 102)."""

    kind = "tool_config"


class ToolFailed(TransientJobError):
    """pdfToolbox failed internally or died by a signal (exit 103, 106, signals)."""

    kind = "tool_internal"


class StorageError(TransientJobError):
    """An S3 transfer failed for a reason that may pass."""

    kind = "storage"
