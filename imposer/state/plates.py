"""A succeeded job's plate: its committed attempt's file, promoted to the job's output key.

Three moments reach for it: the settlement of the job (after its fenced
release), a returning message of a job already final whose host died before
promoting, and the webhook sender, which makes sure the plate is there before
it tells the tenant. The copy is idempotent and conditional
(``Storage.promote``), so any of them may do it, and more than once; what a
conflict means is said here. An AWS error is the caller's to handle: each
has its own way to try again (the settlement's next pass, the message's
next delivery, the sender's schedule).
"""

from __future__ import annotations

import logging

from imposer.aws.s3 import Storage
from imposer.logs import extra
from imposer.models import S3Uri, job_key

logger = logging.getLogger(__name__)


def promote(storage: Storage, *, tenant_id: str, job_id: str, attempt: str, output: str,
            epoch: str) -> bool:
    """Make the plate at *attempt* (of the committed *epoch*) the job's *output*.

    True when it is there (now, or already); False when another attempt's
    plate holds the output, which fencing should make impossible: that one
    is kept, and the conflict logged (``promote_conflict``).
    """
    if storage.promote(S3Uri.parse(attempt), S3Uri.parse(output), epoch):
        return True
    logger.error("job %s: the output already holds another attempt's plate; kept it",
                 job_key(tenant_id, job_id), extra=extra("promote_conflict", tenant_id, job_id))
    return False
