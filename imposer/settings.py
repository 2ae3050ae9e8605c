"""One frozen Settings, built from command-line options and IMPOSER_* variables.

Precedence: an explicit option, then the environment variable, then the
seed's default. Durations are float seconds so tests can run them fast.
The AWS endpoint is boto3's own ``AWS_ENDPOINT_URL``, not a setting here.
How a setting is declared and read is ``imposer.environ``.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Any, Mapping

import attrs

from imposer.environ import boolean, described, read, setting
from imposer.errors import ConfigError


#: The log levels a person may name (any case).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: What a table prefix may be: DynamoDB's table name characters, room for "-rollups".
TABLE_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,200}")
#: SQS queue names: letters, digits, - and _, at most 80.
QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
#: S3 bucket names: 3-63 of lower-case letters, digits, . and -, a letter or digit at each end.
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


#: A lease TTL must be at least this many heartbeat intervals: two renewals may be
#: missed (a throttled call, a slow host) and the third still lands in time.
TTL_HEARTBEATS = 3


@attrs.frozen(kw_only=True)
class Settings:
    """Every tunable of the worker, with the seed's defaults."""

    slots: int = setting(8, "IMPOSER_SLOTS", int, "Pool slots on this host (one licence = 8).", 1)
    default_cap: int = setting(
        4, "IMPOSER_DEFAULT_CAP", int, "Per-tenant concurrency cap when no tier override.", 1
    )
    heartbeat_seconds: float = setting(
        60.0, "IMPOSER_HEARTBEAT_SECONDS", float, "Lease renewal interval.", 0.01
    )
    lease_ttl_seconds: float = setting(
        600.0, "IMPOSER_LEASE_TTL_SECONDS", float, "A lease not renewed this long is reclaimed.", 0.05
    )
    defer_seconds: float = setting(
        30.0, "IMPOSER_DEFER_SECONDS", float, "Visibility delay for a message at cap.", 0
    )
    park_seconds: float = setting(
        300.0, "IMPOSER_PARK_SECONDS", float,
        "How long at least a message at its tenant's cap stays parked if no slot of the "
        "tenant frees (a freed slot takes the oldest parked job at once, on any host); "
        "longer if its receive's visibility (the lease TTL) runs longer.", 0,
    )
    cap_cache_seconds: float = setting(
        5.0, "IMPOSER_CAP_CACHE_SECONDS", float,
        "How long a worker keeps a tenant's row (cap override, bound senders) before reading "
        "it again.", 0
    )
    sweep_seconds: float = setting(
        60.0, "IMPOSER_SWEEP_SECONDS", float, "Interval of the expired-lease sweep.", 0.01
    )
    host_id: str = setting(
        attrs.Factory(socket.gethostname), "IMPOSER_HOST_ID", str, "This worker's host id."
    )
    region: str = setting("us-east-1", "AWS_DEFAULT_REGION", str, "AWS region.")
    queue_name: str = setting("imposer-jobs", "IMPOSER_QUEUE", str, "SQS job queue name.")
    dlq_name: str = setting("imposer-jobs-dlq", "IMPOSER_DLQ", str, "Dead-letter queue name.")
    bucket: str = setting("imposer-artwork", "IMPOSER_BUCKET", str, "Artwork and plate bucket.")
    table_prefix: str = setting(
        "imposer", "IMPOSER_TABLE_PREFIX", str,
        "Prefix of the -leases, -jobs, -tenants, -outbox, -rollups and -waiting tables."
    )
    engine: str = setting("pdftoolbox", "IMPOSER_ENGINE", str, "pdftoolbox or open.",
                          choices=("pdftoolbox", "open"))
    pdftoolbox: str = setting(
        "pdfToolbox", "IMPOSER_PDFTOOLBOX", str, "Path of the pdfToolbox CLI."
    )
    pdftoolbox_args: str = setting(
        "", "IMPOSER_PDFTOOLBOX_ARGS", str, "Extra CLI arguments, e.g. licence-server options."
    )
    pdftoolbox_licence_check: str = setting(
        "--licenseinfo", "IMPOSER_PDFTOOLBOX_LICENCE_CHECK", str,
        "Arguments of the call doctor makes to read the licence (processes no file; empty: "
        "not checked).",
    )
    log_group: str = setting(
        "", "IMPOSER_LOG_GROUP", str,
        "Log group the CloudWatch agent ships IMPOSER_LOG_FILE to; doctor looks for the file's "
        "newest line in this host's stream (empty: not checked).",
    )
    log_file: str = setting(
        "/var/log/imposer/worker.jsonl", "IMPOSER_LOG_FILE", str,
        "The worker log the CloudWatch agent ships (deploy/cloudwatch-agent.json).",
    )
    work_dir: str = setting(
        "", "IMPOSER_WORK_DIR", str,
        "Where pool children keep job files (default: the temp dir's imposer/); a restart "
        "removes what a killed run left there.",
    )
    job_timeout_seconds: float = setting(
        1800.0, "IMPOSER_JOB_TIMEOUT_SECONDS", float, "Kill a job's tool after this long.", 0.1
    )
    memory_limit_mb: float = setting(
        4096.0, "IMPOSER_MEMORY_LIMIT_MB", float,
        "Memory ceiling of one slot: the pdfToolbox tree's RSS, or the open engine's address "
        "space.", 1
    )
    max_input_mb: float = setting(
        1024.0, "IMPOSER_MAX_INPUT_MB", float, "Largest input PDF a job may download.", 1
    )
    max_attempts: int = setting(
        3, "IMPOSER_MAX_ATTEMPTS", int, "Counted failures before a job is dead-lettered.", 1
    )
    retry_seconds: float = setting(
        60.0, "IMPOSER_RETRY_SECONDS", float, "Base delay before a failed job is retried.", 0
    )
    poll_seconds: int = setting(
        2, "IMPOSER_POLL_SECONDS", int, "SQS long-poll wait while slots are free (0-20).", 0
    )
    grace_seconds: float = setting(
        900.0, "IMPOSER_GRACE_SECONDS", float, "Drain: how long running jobs may finish.", 0
    )
    retention_seconds: float = setting(
        14 * 86400.0, "IMPOSER_RETENTION_SECONDS", float, "SQS retention set by init.", 60
    )
    republish_margin_seconds: float = setting(
        86400.0, "IMPOSER_REPUBLISH_MARGIN_SECONDS", float,
        "Re-publish a waiting job this long before SQS retention would drop it.", 0,
    )
    republish_receive_count: int = setting(
        500, "IMPOSER_REPUBLISH_RECEIVE_COUNT", int,
        "Re-publish a deferred message received this often (redrive safety net is 1000).", 2,
    )
    max_receive_count: int = setting(
        1000, "IMPOSER_MAX_RECEIVE_COUNT", int, "Queue redrive maxReceiveCount set by init.", 1
    )
    borrow: bool = setting(False, "IMPOSER_BORROW", boolean, "Let a tenant at cap borrow idle slots.")
    redrive_seconds: float = setting(
        5.0, "IMPOSER_REDRIVE_SECONDS", float,
        "How often a host reads who has work waiting: parked jobs a failed hand-off left are "
        "started then, and with borrowing on idle slots are lent to capped tenants' parked "
        "jobs.", 0.05,
    )
    reserve_slots: int = setting(
        1, "IMPOSER_RESERVE_SLOTS", int, "Slots per host never lent to borrowed work.", 0
    )
    share_half_life: float = setting(
        0.0, "IMPOSER_SHARE_HALF_LIFE", float,
        "Fair share of licence time: the half-life, in seconds, of the licence-seconds each "
        "tenant used; a free slot goes to the waiting tenant furthest below its weighted "
        "share (imposer tenants set T --weight W), within its cap. 0 turns it off: the "
        "count caps alone.", 0,
    )
    webhook_schedule: str = setting(
        "5,300,1800,7200,18000,36000,36000", "IMPOSER_WEBHOOK_SCHEDULE", str,
        "Seconds between webhook attempts (comma-separated; after the last, it is failed).",
    )
    webhook_poll_seconds: float = setting(
        5.0, "IMPOSER_WEBHOOK_POLL_SECONDS", float,
        "How often each host looks for due webhooks in the outbox.", 0.05,
    )
    rollup_seconds: float = setting(
        60.0, "IMPOSER_ROLLUP_SECONDS", float,
        "How often a host writes its hourly rollup deltas (report data only).", 0.05,
    )
    boot_retry_seconds: float = setting(
        120.0, "IMPOSER_BOOT_RETRY_SECONDS", float,
        "How long a starting worker retries AWS that is not reachable yet before exiting 4.", 0,
    )
    allow_http_loopback: bool = setting(
        False, "IMPOSER_WEBHOOK_ALLOW_LOOPBACK", boolean,
        "Allow http:// webhooks to loopback (local use only).",
    )
    pace_seconds: float = setting(
        0.0, "IMPOSER_PACE_SECONDS", float,
        "Hold each job at least this long (demos and benchmarks only; 0 in production).", 0,
    )
    job_retention_days: float = setting(
        35.0, "IMPOSER_JOB_RETENTION_DAYS", float,
        "Days a final job record (and its webhook event) is kept before DynamoDB's TTL "
        "deletes it; covers the 4-week licence window.", 1,
    )
    trusted_senders: str = setting(
        "", "IMPOSER_TRUSTED_SENDERS", str,
        "SQS sender ids (IAM user id, role id, or role-id:session) that may send for any "
        "tenant: a front door that stamps the tenant, other worker principals.",
    )
    require_senders: bool = setting(
        False, "IMPOSER_REQUIRE_SENDERS", boolean,
        "Refuse a message for a tenant with no bound senders unless a trusted sender sent it.",
    )
    metrics_namespace: str = setting(
        "imposer", "IMPOSER_METRICS_NAMESPACE", str, "CloudWatch EMF namespace."
    )
    log_level: str = setting("INFO", "IMPOSER_LOG_LEVEL", str, "Log level.",
                             choices=LOG_LEVELS)

    @property
    def work_root(self) -> Path:
        return Path(self.work_dir) if self.work_dir else Path(tempfile.gettempdir()) / "imposer"

    @property
    def leases_table(self) -> str:
        return f"{self.table_prefix}-leases"

    @property
    def jobs_table(self) -> str:
        return f"{self.table_prefix}-jobs"

    @property
    def tenants_table(self) -> str:
        return f"{self.table_prefix}-tenants"

    @property
    def outbox_table(self) -> str:
        return f"{self.table_prefix}-outbox"

    @property
    def rollups_table(self) -> str:
        return f"{self.table_prefix}-rollups"

    @property
    def waiting_table(self) -> str:
        return f"{self.table_prefix}-waiting"

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, **options: Any) -> "Settings":
        """Build settings: options that are not None win over the environment."""
        values, sources = read(cls, os.environ if environ is None else environ, options)
        settings = cls(**values)
        settings.check(sources)
        return settings

    def check(self, sources: Mapping[str, str] | None = None) -> None:
        """Refuse combinations that cannot work, naming the option or variable that was given."""
        def name(field: str) -> str:
            given = (sources or {}).get(field)
            return given or attrs.fields_dict(Settings)[field].metadata["env"]

        if self.engine not in ("pdftoolbox", "open"):
            raise ConfigError(f"{name('engine')}: {self.engine!r} is not pdftoolbox or open")
        if self.log_level.upper() not in LOG_LEVELS:
            raise ConfigError(f"{name('log_level')}: {self.log_level!r} is not a log level "
                              f"({', '.join(LOG_LEVELS)})")
        for field, pattern, rule in (
                ("table_prefix", TABLE_PREFIX, "1-200 of A-Z a-z 0-9 . _ -"),
                ("queue_name", QUEUE_NAME, "1-80 of A-Z a-z 0-9 _ -"),
                ("dlq_name", QUEUE_NAME, "1-80 of A-Z a-z 0-9 _ -"),
                ("bucket", BUCKET_NAME, "3-63 of a-z 0-9 . -, a letter or digit at each end")):
            if not pattern.fullmatch(getattr(self, field)):
                raise ConfigError(f"{name(field)}: {getattr(self, field)[:100]!r} is not a valid "
                                  f"name ({rule})")
        if not 0 <= self.poll_seconds <= 20:
            raise ConfigError(f"{name('poll_seconds')} must be between 0 and 20 (SQS's long "
                              f"poll limit), got {self.poll_seconds}")
        if self.lease_ttl_seconds < TTL_HEARTBEATS * self.heartbeat_seconds:
            raise ConfigError(
                f"{name('lease_ttl_seconds')} ({self.lease_ttl_seconds:g}) must be at least "
                f"{TTL_HEARTBEATS} x {name('heartbeat_seconds')} ({self.heartbeat_seconds:g}): a "
                "lease must outlive two missed renewals and the slowest renewal")
        try:
            schedule = [float(x) for x in self.webhook_schedule.split(",") if x.strip()]
        except ValueError:
            schedule = [-1.0]
        if not schedule or min(schedule) < 0:
            raise ConfigError(f"{name('webhook_schedule')} must be comma-separated seconds, "
                              f"got {self.webhook_schedule!r}")
        if self.borrow and self.reserve_slots >= self.slots:
            raise ConfigError(f"{name('reserve_slots')} must be smaller than {name('slots')}")

    def evolve(self, **changes: Any) -> "Settings":
        return attrs.evolve(self, **changes)


def env_help(name: str) -> str:
    """Help text of a setting with its variable and default, for click options."""
    return described(attrs.fields_dict(Settings)[name])
