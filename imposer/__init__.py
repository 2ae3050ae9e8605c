"""imposer: a fair multi-tenant PDF imposition worker.

A job flows: SQS message (``queue``) -> ``dispatch`` (parse, prefix check)
-> lease transaction (``leases``) -> pool slot (``pool``) -> child task
(``task``: ``storage`` -> ``engine`` or ``toolbox`` -> ``storage``) ->
``completion`` (release transaction, then the message is deleted, retried or
dead-lettered, and the webhook sent by ``notify``).
The parent loop that drives it is ``supervisor``, with its ``heartbeat`` and
``sweep`` threads; ``cli`` starts it. The tenant side is ``client``.
"""

__version__ = "0.1.0"
