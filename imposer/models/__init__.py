"""Values that cross a process, thread or table boundary.

The tenant-side client shares this package, and only this, with the service.
``request`` holds the SQS message body; ``records`` the table items and the
pool's outcomes.
"""

from imposer.models.records import (
    FINAL_STATUSES,
    Fate,
    JobRecord,
    JobStatus,
    Lease,
    Outcome,
    TenantConfig,
    counter_key,
    lease_key,
)
from imposer.models.request import TENANT_PREFIX, JobRequest, S3Uri, new_job_id, valid_id

__all__ = [
    "FINAL_STATUSES", "Fate", "JobRecord", "JobRequest", "JobStatus", "Lease", "Outcome",
    "S3Uri", "TENANT_PREFIX", "TenantConfig", "counter_key", "lease_key", "new_job_id",
    "valid_id",
]
