"""Values that cross a process, thread or table boundary.

The tenant-side client shares this package, and only this, with the service.
``request`` holds the SQS message body; ``message`` a received SQS message;
``records`` the table items and the pool's outcomes; ``tenant`` a tenant's config
row; ``task`` what the parent hands a pool child.
"""

from imposer.models.message import Received
from imposer.models.records import (
    FINAL_STATUSES,
    Fate,
    JobRecord,
    JobStatus,
    Lease,
    Outcome,
    TenantCounter,
    WebhookStatus,
    counter_key,
    lease_key,
    usage_key,
)
from imposer.models.request import (
    TENANT_PREFIX,
    JobRequest,
    S3Uri,
    job_key,
    new_job_id,
    parse_json,
    valid_id,
)
from imposer.models.task import TaskSpec
from imposer.models.tenant import TenantConfig

__all__ = [
    "FINAL_STATUSES", "Fate", "JobRecord", "JobRequest", "JobStatus", "Lease", "Outcome",
    "Received", "S3Uri", "TENANT_PREFIX", "TaskSpec", "TenantConfig", "TenantCounter",
    "WebhookStatus", "counter_key", "job_key", "lease_key", "usage_key", "new_job_id",
    "parse_json", "valid_id",
]
