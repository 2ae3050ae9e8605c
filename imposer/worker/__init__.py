"""The long-running parent of `imposer run`: it alone talks to SQS and the lease state.

A message flows through the subpackages in the order of their names below:

    receive/    the long poll (``receiver``), what to ask for next (``intake``), the
                vetting of a message before any slot is spent on it, and whether any
                work is left for this host (``leftover``)
    dispatch/   a vetted message becomes a running job: lease it (``dispatcher``),
                launch it in a ``pool`` slot, or park it at its tenant's cap
                (``deferral``, ``handoff``), lend an idle slot (``borrowing``), park
                it for a tenant further below its share (``shares``), or settle a
                copy of a job that runs or ran already (``duplicates``)
    settle/     a finished job from its fate to its slot's next owner, in one order
                (``settler``): its slot promised to a parked job (``promise``), its
                release and plate (``completion``, what the release writes in
                ``record``), its message and report (``ending``), the job its slot was
                handed to launched
                (``successor``); the decision carried out for a slot no promise
                reached (``refill``), a parked job started (``parked``)
    threads/    beside the loop: lease and message heartbeats, the sweep, the hourly
                rollups, the gauges (webhook delivery is ``imposer.webhooks.outbox``)

At the top: ``supervisor`` is the loop, ``wiring`` builds it and every part it
runs (and the stores) from Settings, ``allocation`` is the one decision of who
gets each free slot and ``executor`` the one loop that asks it step by step (the
settler and the refill carry its steps out; the simulator runs both on its fleet),
``steps`` their words, ``policy`` holds the pure rules both share, ``messages`` owns a message's fate, ``running`` the table of
this host's jobs, ``overrun`` the limit of a job's run, ``reaping`` where a
job's run ends (a child's report, a kill), ``timing`` every share of the lease TTL,
and ``boot`` and ``signals`` start and stop it.
"""
