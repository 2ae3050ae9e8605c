"""`imposer simulate`: imposer's own dispatch policy replayed in virtual time.

Answer "how many licences, which caps, borrowing or not?" before buying:
replay a workload of (tenant, arrival, run seconds, fates) through the same
rules the worker applies, on any number of hosts and slots, in a second.

    workload   SimJob values: from job records (``sources`` reads the jobs table
               or a JSONL export) or a synthetic generator
    engine     the discrete-event simulation (``simulate``): its event loop and
               the fleet's state; every decision is a call into
               ``imposer.worker.policy``
    parent     a pass of one host's parent loop; starting and settling children
    dispatch   a receive's batch: start, park at the cap, defer a paused
               tenant's, lend a slot (borrowing with its reserve)
    handoff    a freed slot: the worker's own decision and executor
               (``worker.allocation``, ``worker.executor``), each step carried out
               on the fleet
    delivery   fair-queue delivery by message group, and each host's receive
               with its long poll
    shares     fair share of licence time (a usage half-life set): usage charged
               at each release, and who of the tenants waiting gets a free slot
    state      AWS calls per step, the codes of events and states, a host's record
    policy     one variant: the fleet and its settings (``Policy``)
    rules      the worker's decisions a run is given (``WORKER``: worker.policy's own)
    schedule   what a run returns: every attempt, each job's fate, the counts
    metrics    one variant's figures: utilisation, waits per tenant, quiet vs
               heavy, the busiest day's makespan, the licence rule's verdict
               (``imposer.reports.capacity`` over simulated host-hours)
    variants   the grid of variants side by side and the smallest slot count
               that meets the licence rule
    chart      waits and utilisation per variant (matplotlib, optional)
    headline   the benchmark's figures and targets per policy, for the guard tests
    fairness   fair share's figures and targets: licence time by weighted share,
               Jain's index, a late tenant's first start

Only time and AWS are simulated: the rules come from the worker, the
verdict from the reports, so neither can drift from what `imposer run` and
`imposer capacity` do.
"""
