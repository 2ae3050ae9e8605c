"""The client's own rooted exception hierarchy.

Each class's docstring is its meaning and each has a distinct ``exit_code``
so a command-line wrapper can tell a caller's script what went wrong
without parsing text. The client shares no exception with the service.
"""

from __future__ import annotations

from imposer.models.exits import Exit


class ImposerClientError(Exception):
    """Anything the imposer client raises on purpose."""

    exit_code = Exit.FAILED


class AdmissionError(ImposerClientError):
    """Admission control refused a job before it was published."""

    exit_code = Exit.ADMISSION


class DuplicateToken(AdmissionError):
    """The idempotency token already belongs to a job in flight or completed."""

    exit_code = Exit.DUPLICATE_TOKEN

    def __init__(self, token: str, job_id: str, state: str) -> None:
        #: The token that was offered again.
        self.token = token
        #: Id of the job that already holds the token.
        self.job_id = job_id
        #: ``"in_flight"`` or ``"completed"``.
        self.state = state
        super().__init__(f"token {token!r} is already {state.replace('_', ' ')} as job {job_id}")

    @property
    def in_flight(self) -> bool:
        return self.state == "in_flight"

    @property
    def completed(self) -> bool:
        return self.state == "completed"


class RateLimited(AdmissionError):
    """The tenant submitted its allowed number of jobs within the sliding window."""

    exit_code = Exit.RATE_LIMITED

    def __init__(self, retry_after: float, limit: int, window: float) -> None:
        #: Seconds until the oldest submission leaves the window.
        self.retry_after = retry_after
        self.limit = limit
        self.window = window
        super().__init__(
            f"rate limit of {limit} jobs per {window:g} s reached; retry in {retry_after:.1f} s"
        )


class InflightCapReached(AdmissionError):
    """The tenant has as many unconfirmed jobs as its in-flight cap allows."""

    exit_code = Exit.INFLIGHT_CAP

    def __init__(self, cap: int, inflight: int) -> None:
        #: The tenant's in-flight cap.
        self.cap = cap
        #: Jobs submitted and not yet confirmed.
        self.inflight = inflight
        super().__init__(f"{inflight} jobs in flight, at the cap of {cap}; wait for completions")


class AdmissionUnavailable(ImposerClientError):
    """Admission control could not be asked: Redis unreachable, or no connection of the
    pool came free in time. Nothing was admitted; the job may be submitted again."""

    exit_code = Exit.BACKEND


class SubmitError(ImposerClientError):
    """Uploading the artwork or publishing the job message failed."""

    exit_code = Exit.SUBMIT_FAILED


class WebhookVerificationError(ImposerClientError):
    """A webhook request is unsigned, wrongly signed, malformed or too old to trust."""

    exit_code = Exit.WEBHOOK_VERIFICATION
