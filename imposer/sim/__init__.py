"""`imposer simulate`: imposer's own dispatch policy replayed in virtual time.

Answer "how many licences, which caps, borrowing or not?" before buying:
replay a workload of (tenant, arrival, run seconds, fates) through the same
rules the worker applies, on any number of hosts and slots, in a second.

    workload   SimJob values: from job records (``sources`` reads the jobs table
               or a JSONL export) or a synthetic generator
    engine     the discrete-event simulation: fair-queue delivery by message
               group, the cap with its park window and hand-off, deferral of
               paused tenants, borrowing with its reserve, retries; every
               decision is a call into ``imposer.worker.policy``
    metrics    one variant's figures: utilisation, waits per tenant, quiet vs
               heavy, the busiest day's makespan, the licence rule's verdict
               (``imposer.reports.capacity`` over simulated host-hours)
    variants   the grid of variants side by side and the smallest slot count
               that meets the licence rule
    chart      waits and utilisation per variant (matplotlib, optional)

Only time and AWS are simulated: the rules come from the worker, the
verdict from the reports, so neither can drift from what `imposer run` and
`imposer capacity` do.
"""
