"""imposer: a fair multi-tenant PDF imposition worker.

How a job flows, package by package::

    client     a tenant's app: admission (Redis), upload, SQS message with MessageGroupId
    worker     the parent of `imposer run`: receive (aws.sqs) -> dispatch -> lease
               transaction (state.leases) -> pool slot -> completion (release
               transaction, then messages decides delete / retry / dead-letter)
    child      inside a pool process: download (aws.s3) -> engine (open engine or
               engine.pdftoolbox) -> upload -> Outcome back over the pipe
    webhooks   the outbox's sender thread beside the parent loop: the signed completion
               event, its delivery and the SSRF guard
    reports    stats, the licence rule (capacity), why a job waits
    cli        the `imposer` command; dev holds the demo, sample artwork and the
               embedded local AWS stack (dev.localstack) of `imposer local` and the tests

Under them: ``state`` (leases, jobs, tenants tables) over ``aws`` (the only
home of boto3), ``models`` (values that cross a process, thread or table
boundary, shared with the client) and the core modules ``errors``,
``settings`` (declared and read by ``environ``), ``clock``, ``logs``, ``metrics`` and
``backoff``.

Imports flow one way; ``ALLOWED_IMPORTS`` below is the rule and
``tests/test_architecture.py`` pins it. A pool child reaches S3 only: it may
import ``aws.s3`` and ``aws.session`` but never ``aws.sqs``, ``aws.dynamodb``
or ``state``. No import closes a loop between modules, not even one inside a
function (the same test); a lazy import is for start-up cost or an optional
dependency only.
"""

__version__ = "0.2.0"

#: Modules at the root of the package that everything may import.
CORE = ("errors", "settings", "environ", "clock", "logs", "metrics", "backoff")

#: Package -> what it may import besides itself: other packages, ``aws.*`` modules, or
#: "core" for the modules above. ``*`` means anything. The client shares only models.
ALLOWED_IMPORTS = {
    "core": ("core",),
    "models": ("core",),
    "aws": ("core", "models"),
    "state": ("core", "models", "aws"),
    "engine": ("core", "models"),
    "child": ("core", "models", "engine", "aws.s3", "aws.session"),
    "webhooks": ("core", "models", "state", "aws.s3", "aws.session"),
    "reports": ("core", "models", "state"),
    "worker": ("core", "models", "aws", "state", "child", "webhooks"),
    "client": ("models",),
    "sim": ("core", "models", "state", "reports", "worker"),
    "dev": ("core", "models", "aws", "state", "engine", "worker", "webhooks", "reports",
            "client"),
    "cli": ("*",),
}
