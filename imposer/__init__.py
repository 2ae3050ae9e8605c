"""imposer: a fair multi-tenant PDF imposition worker.

A job flows: SQS message (``queue``) -> lease transaction (``leases``) ->
pool slot (``pool``) -> child task (``task``: storage -> engine -> storage)
-> release transaction (``leases``) -> message deleted (``queue``).
The parent loop that drives it is ``supervisor``; ``cli`` starts it.
"""

__version__ = "0.1.0"
