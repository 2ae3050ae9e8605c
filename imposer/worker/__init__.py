"""The long-running parent of `imposer run`: it alone talks to SQS and the lease state.

``supervisor`` is the loop; ``dispatch`` turns messages into running jobs,
``completion`` settles them, ``messages`` decides what happens to a message
next, ``pool`` holds the slot processes, and ``heartbeat``, ``sweep``,
``borrowing`` and ``contention`` run beside it. ``wiring`` builds the
stores from Settings.
"""
