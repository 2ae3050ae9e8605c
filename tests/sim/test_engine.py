"""The simulator against schedules computed by hand, in virtual time."""

from __future__ import annotations

import pytest

from imposer.errors import ConfigError
from imposer.sim.engine import Policy, simulate
from imposer.sim.headline import overlap
from imposer.sim.workload import SimJob


def jobs(*specs) -> list[SimJob]:
    """``("acme", at, run)`` or ``("acme", at, run, fates)`` tuples as jobs, named in order."""
    out = []
    for n, spec in enumerate(specs):
        tenant, at, run, *fates = spec
        out.append(SimJob(tenant=tenant, arrival=at, run=run, job_id=f"{tenant}{n}",
                          **({"fates": fates[0]} if fates else {})))
    return out


def starts(schedule) -> list[float | None]:
    return list(schedule.first_start)


def concurrency(schedule, tenant: str | None = None) -> int:
    return overlap([(a.start, a.end) for a in schedule.attempts
                    if tenant is None or schedule.jobs[a.job].tenant == tenant])


class TestTheCap:
    def test_a_capped_backlog_runs_one_after_another(self):
        """Cap 1 on two slots: each job starts as the one before it ends (hand-off)."""
        s = simulate(jobs(("a", 0, 10), ("a", 0, 10), ("a", 0, 10)),
                     Policy(slots=2, cap=1, park_seconds=300))
        assert starts(s) == [0, 10, 20]
        assert (s.counts["parked"], s.counts["handed_off"], s.counts["park_expired"]) == (2, 2, 0)

    def test_no_tenant_above_its_cap_across_hosts(self):
        """The cap is one counter for the fleet: two hosts of 4 still run 4 of a lone tenant."""
        s = simulate(jobs(*[("a", 0, 1 + n % 3) for n in range(30)]),
                     Policy(hosts=2, slots=4, cap=4))
        assert concurrency(s, "a") == 4
        assert all(x == "succeeded" for x in s.status)

    def test_the_last_free_slot_is_handed_over_when_a_look_finds_the_queue_empty(self):
        """The freed slot is the host's last: the queue is looked at, then the slot handed over.

        a's second job is parked at t=0; b's long job takes the other slot at
        t=1. When a's first job ends at t=10 only its slot is free; a look at
        the queue (a receive that does not wait) finds nothing, so the release
        hands the slot to a's parked job at t=10 (not after the 4 s poll, nor
        the park window, t=300), and nothing is owed.
        """
        work = jobs(("a", 0, 10), ("a", 0, 10), ("b", 1, 30))
        s = simulate(work, Policy(slots=2, cap=1, park_seconds=300, poll_seconds=4))
        assert starts(s) == [0, 10, 1]
        assert (s.counts["handed_off"], s.counts["park_expired"]) == (1, 0)
        assert s.counts["owed"] == 0  # (at a's second end, t=20, nothing is parked)
        instant = simulate(work, Policy(slots=2, cap=1, park_seconds=300))
        assert starts(instant) == [0, 10, 1]

    def test_the_last_free_slot_goes_to_the_queue_first(self):
        """A tenant waiting in the queue takes the last free slot; the owed hand-off waits.

        As above, with c's job arriving at t=5 while both slots are busy. At
        t=10 the look at the queue brings c's message, which takes the slot;
        a is owed the hand-off, and its parked job starts only when a later
        receive comes back empty: c ends at 20, and that receive (asked while
        a hand-off is owed, so without a long poll) finds nothing at once.
        """
        s = simulate(jobs(("a", 0, 10), ("a", 0, 10), ("b", 1, 30), ("c", 5, 10)),
                     Policy(slots=2, cap=1, park_seconds=300, poll_seconds=4))
        assert starts(s) == [0, 20, 1, 10]
        assert (s.counts["handed_off"], s.counts["park_expired"]) == (1, 0)

    def test_perfect_delivery_refills_at_once(self):
        """With instant delivery the same workload starts a's second job the moment it may."""
        s = simulate(jobs(("a", 0, 10), ("a", 0, 10), ("b", 1, 30)),
                     Policy(slots=2, cap=1).perfect())
        assert starts(s) == [0, 10, 1]

    def test_perfect_delivery_keeps_a_lone_tenant_at_its_cap(self):
        """Work-conserving within the cap: a lone backlog always holds all of its slots."""
        s = simulate(jobs(*[("a", 0, 1 + (n * 7) % 5) for n in range(40)]),
                     Policy(slots=8, cap=3).perfect())
        for a in s.attempts:
            running = sum(1 for b in s.attempts if b.start <= a.start < b.end)
            assert running == 3 or a.start >= max(b.start for b in s.attempts)
        assert concurrency(s) == 3

    def test_a_paused_tenant_never_starts(self):
        """Cap 0 holds a tenant's jobs back without taking slots from the others."""
        s = simulate(jobs(("a", 0, 5), ("p", 0, 5), ("a", 0, 5)),
                     Policy(slots=1, cap=4, caps={"p": 0}, defer_seconds=30))
        assert s.status == ("succeeded", "paused", "succeeded")
        assert starts(s) == [0, None, 5]


class TestDelivery:
    WORK = (("noisy", 0, 10), ("noisy", 0, 20), ("noisy", 0, 10), ("quiet", 1, 5))

    def test_fair_queues_deliver_the_quieter_group_first(self):
        """At t=10 noisy has a job in flight and quiet none: quiet's message comes first."""
        s = simulate(jobs(*self.WORK), Policy(slots=2, cap=8, fair_queues=True))
        assert starts(s) == [0, 0, 15, 10]

    def test_strict_order_serves_the_backlog_first(self):
        """The same on a strictly ordered queue: quiet waits behind noisy's third job."""
        s = simulate(jobs(*self.WORK), Policy(slots=2, cap=8, fair_queues=False))
        assert starts(s) == [0, 0, 10, 20]


class TestBorrowing:
    def test_a_lone_tenant_borrows_all_but_the_reserve(self):
        """Cap 2 on 4 slots with a reserve of 1: three run at once, with instant delivery."""
        s = simulate(jobs(*[("a", 0, 10) for _ in range(6)]),
                     Policy(slots=4, cap=2, borrow=True, reserve=1).perfect())
        assert starts(s) == [0, 0, 0, 10, 10, 10]
        assert sum(a.borrowed for a in s.attempts) == 2

    def test_without_borrowing_the_cap_idles_slots(self):
        """The same without borrowing takes three rounds."""
        s = simulate(jobs(*[("a", 0, 10) for _ in range(6)]),
                     Policy(slots=4, cap=2, borrow=False).perfect())
        assert starts(s) == [0, 0, 10, 10, 20, 20]

    def test_nobody_borrows_while_a_tenant_below_its_cap_waits(self):
        """c's failed job waits for its retry below c's cap: a may not borrow meanwhile.

        At t=0 nobody waits, so a borrows two slots; at t=10 c's job is
        retrying (a retrying record, c below its cap), so a starts only its
        own job.
        """
        s = simulate(jobs(("c", 0, 10, ("retry", "succeeded")),
                          *[("a", 0, 10) for _ in range(7)]),
                     Policy(slots=4, cap=1, borrow=True, reserve=0, retry_seconds=100).perfect())
        at = {t: [a.borrowed for a in s.attempts if a.start == t] for t in (0, 10)}
        assert at == {0: [False, False, True, True], 10: [False]}

    def test_a_freed_borrowed_slot_is_lent_to_parked_work(self):
        """a's borrowed jobs end at t=10 while a still holds its cap: its parked jobs borrow
        the freed slots at once, as with instant delivery (not at t=50, when its own job ends).
        """
        work = jobs(("a", 0, 50), *[("a", 0, 10) for _ in range(4)])
        parked = simulate(work, Policy(slots=4, cap=1, borrow=True, reserve=1))
        assert parked.counts["parked"] == 2
        assert starts(parked) == [0, 0, 0, 10, 10]
        assert sum(a.borrowed for a in parked.attempts) == 4
        instant = simulate(work, Policy(slots=4, cap=1, borrow=True, reserve=1).perfect())
        assert starts(instant) == [0, 0, 0, 10, 10]

    def test_an_express_tenants_parked_work_borrows_the_reserve_too(self):
        """The express class (docs/priority.rst): the same 9 jobs run 4 at a time, with
        parking and with instant delivery; without borrowing the class changes nothing."""
        work = jobs(*[("a", 0, 10) for _ in range(9)])
        express = Policy(slots=4, cap=1, borrow=True, reserve=1, express=("a",))
        for policy in (express, express.perfect()):
            s = simulate(work, policy)
            assert concurrency(s) == 4
            assert starts(s) == [0, 0, 0, 0, 10, 10, 10, 10, 20]
        off = simulate(work, Policy(slots=4, cap=1, borrow=False, express=("a",)))
        assert concurrency(off) == 1

    def test_a_plain_tenant_still_leaves_the_reserve_beside_an_express_one(self):
        """b is not express: with a's work done, b borrows all but the reserve again."""
        work = jobs(("a", 0, 5), *[("b", 0, 10) for _ in range(6)])
        s = simulate(work, Policy(slots=4, cap=1, borrow=True, reserve=1,
                                  express=("a",)).perfect())
        assert concurrency(s, "b") == 3

    def test_parked_work_never_borrows_the_reserve(self):
        """Lending parked work keeps the reserve free: at most 3 of 4 slots run at once."""
        work = jobs(*[("a", 0, 10) for _ in range(9)])
        s = simulate(work, Policy(slots=4, cap=1, borrow=True, reserve=1))
        assert concurrency(s) == 3
        assert starts(s) == [0, 0, 0, 10, 10, 10, 20, 20, 20]

    def test_parked_work_does_not_borrow_while_a_tenant_below_its_cap_waits(self):
        """b's retrying job is waiting below b's cap: a's borrowed slots are not lent again."""
        work = jobs(("b", 0, 5, ("retry", "succeeded")),
                    *[("a", 0, 10) for _ in range(6)])
        s = simulate(work, Policy(slots=4, cap=1, borrow=True, reserve=0, retry_seconds=100))
        at10 = [(s.jobs[a.job].tenant, a.borrowed) for a in s.attempts if a.start == 10]
        assert at10 == [("a", False)]


class TestRetries:
    def test_a_counted_failure_comes_back_after_the_backoff(self):
        """retry_seconds 5: the second attempt starts 5 s after the first ends."""
        s = simulate(jobs(("a", 0, 10, ("retry", "succeeded"))),
                     Policy(retry_seconds=5, max_attempts=3))
        assert [(a.start, a.end) for a in s.attempts] == [(0, 10), (15, 25)]
        assert s.status == ("succeeded",)

    def test_the_backoff_doubles(self):
        """Failures 1 and 2 wait 5 s and 10 s."""
        s = simulate(jobs(("a", 0, 10, ("retry", "retry", "succeeded"))),
                     Policy(retry_seconds=5, max_attempts=3))
        assert [a.start for a in s.attempts] == [0, 15, 35]

    def test_the_last_counted_failure_dead_letters(self):
        """max_attempts 2: the second counted failure ends the job as dead."""
        s = simulate(jobs(("a", 0, 10, ("retry",))), Policy(retry_seconds=5, max_attempts=2))
        assert s.status == ("dead",) and len(s.attempts) == 2

    def test_a_licence_retry_waits_the_deferral_and_is_not_counted(self):
        """A requeue comes back after the deferral and never dead-letters."""
        s = simulate(jobs(("a", 0, 10, ("requeue", "requeue", "succeeded"))),
                     Policy(defer_seconds=30, max_attempts=1))
        assert [a.start for a in s.attempts] == [0, 40, 80]
        assert s.status == ("succeeded",)


class TestPolicyValues:
    def test_negative_values_are_refused(self):
        """A fleet of no slots or a negative delay is a mistake, said in words."""
        with pytest.raises(ConfigError):
            Policy(slots=0)
        with pytest.raises(ConfigError):
            Policy(park_seconds=-1)
        with pytest.raises(ConfigError):
            Policy(redrive_seconds=-1)

    def test_tier_caps_override_the_default(self):
        """``caps`` is per tenant; others have the default."""
        p = Policy(cap=4, caps={"big": 6})
        assert (p.cap_of("big"), p.cap_of("small")) == (6, 4)


class TestTheParentsTime:
    def test_parking_a_backlog_takes_aws_time(self):
        """0.1 s a call: an acquire is 2 calls with the cap read, 1 within 5 s of it; a park 1.

        The first job starts when its acquire commits (0.2 s); the second is
        found at cap (0.3 s) and parked (0.4 s); the memo then parks the next
        three without asking, in two receives: each asks for the free slot and
        as many more as the last batch parked (``receive_size``), so the
        second brings two and the third one. Each settle is five calls;
        its hand-off rides on the release (no acquire of its own) but reads
        the cap again (the last read is more than 5 s old), and the first one
        reads the tenant's notes: that Query serves the next three, and the
        fifth settle, with none left, reads again and finds none.
        """
        s = simulate(jobs(*[("a", 0, 10) for _ in range(5)]),
                     Policy(slots=2, cap=1, call_seconds=0.1, defer_seconds=30))
        assert s.first_start[0] == pytest.approx(0.2)
        receives, acquires, parks = 4, 2 + 1, 4 * 1  # the fourth receive finds nothing
        settles, hand_offs = 5 * 5, 5 * 1 + 2  # a cap read each; two note Queries
        assert (s.counts["parked"], s.counts["receives"], s.counts["received"]) == (4, 4, 5)
        assert s.counts["calls"] == receives + acquires + parks + settles + hand_offs
        # job 0 ends at 10.2; its release (0.1 s) and the rest of its settle (0.4 s), the
        # cap read and the note Query (0.2 s) come before job 1 starts, with that release
        assert s.first_start[1] == pytest.approx(10.2 + 0.1 + 0.4 + 0.2)
        assert s.first_start[4] == pytest.approx(10.9 + 3 * (10 + 0.6))

    def test_the_cap_read_is_cached(self):
        """With the cache off every acquire reads the tenant's cap: one call more each."""
        work = jobs(*[("a", 0, 10) for _ in range(5)])
        cached = simulate(work, Policy(slots=2, cap=1, call_seconds=0.1, defer_seconds=30))
        uncached = simulate(work, Policy(slots=2, cap=1, call_seconds=0.1, defer_seconds=30,
                                         cap_cache_seconds=0))
        assert uncached.counts["calls"] - cached.counts["calls"] == 1  # job 1's acquire at 0.2

    def test_a_child_ending_during_a_long_poll_is_settled_at_once(self):
        """The receive polls beside the parent: a job ending meanwhile is settled, and its
        slot handed off, when it ends, not when the poll returns."""
        work = jobs(("a", 0, 2.5), ("a", 0, 2.5))
        polled = simulate(work, Policy(slots=2, cap=1, poll_seconds=1))
        assert polled.first_start == (0, 2.5)
        assert polled.counts["handed_off"] == 1
        assert simulate(work, Policy(slots=2, cap=1)).first_start == (0, 2.5)

    def test_a_message_ends_the_long_poll(self):
        """A message sent during a poll is received when it is sent, not when the poll ends."""
        s = simulate(jobs(("a", 0, 1), ("b", 2.5, 1)), Policy(slots=2, cap=1, poll_seconds=20))
        assert s.first_start == (0, 2.5)

    def test_an_idle_parent_polls_once_per_poll(self):
        """Every long poll is a receive: one job of 10.5 s, then a poll a second until it ends.

        The first receive takes the job; the next asks for the free slot and
        polls from t=0, then one each second: eleven polls by t=10.5.
        """
        s = simulate(jobs(("a", 0, 10.5)), Policy(slots=2, cap=1, poll_seconds=1))
        assert s.counts["receives"] == 1 + 11

    def test_a_host_that_boots_late_finds_the_cap_held(self):
        """Host 1 starts at t=1: host 0 holds a's cap of 2 on its 2 slots, and keeps it.

        Host 1 receives jobs 2 and 3 at t=1 and parks them. Both of host 0's
        jobs end at t=10: the first settled job's slot is handed to job 2
        (two slots free), the second's is the host's last, so it is owed and
        paid by the receive asked for it, which does not long-poll while a
        hand-off is owed (t=10, not after the 4 s poll). Host 1 settles none
        of a's jobs, so it never hands off.
        """
        s = simulate(jobs(*[("a", 0, 10) for _ in range(4)]),
                     Policy(hosts=2, slots=2, cap=2, poll_seconds=4), boot=(0, 1))
        assert starts(s) == [0, 0, 10, 10]
        assert {a.host for a in s.attempts} == {0}
        assert (s.counts["parked"], s.counts["handed_off"]) == (2, 2)

    def test_hosts_decide_in_turn(self):
        """Two hosts receive at once; each acquire reads the counter as its commit finds it.

        Host 1 receives jobs 0 and 1, host 2 jobs 2 and 3, and each tries its
        pair as a burst (one transaction). Under a cap of 2 the first burst to
        commit takes both slots; the other is refused, and its one-by-one
        acquire finds the cap: it parks both (the second on the memo). Under a
        cap of 3 the refused host's first one-by-one acquire still fits.
        """
        for cap, hosts, parked in ((2, [[0, 0], [1, 1]], 2), (3, [[0, 0, 1], [0, 1, 1]], 1)):
            s = simulate(jobs(*[("a", 0, 10) for _ in range(4)]),
                         Policy(hosts=2, slots=2, cap=cap, call_seconds=0.1))
            started = sorted(a.host for a in s.attempts if a.start < 1)
            assert started in hosts, cap
            assert s.counts["parked"] == parked, cap


class TestFairShare:
    def used(self, schedule, until: float) -> dict[str, float]:
        out: dict[str, float] = {}
        for a in schedule.attempts:
            tenant = schedule.jobs[a.job].tenant
            out[tenant] = out.get(tenant, 0.0) + max(0.0, min(a.end, until) - a.start)
        return out

    def test_licence_time_follows_the_weights(self):
        """Two backlogs on two slots, AWS taking its time: fair share splits the licence
        time evenly, or 3:1 to the tenant weighted 3, where the caps alone gave the first
        backlog most of it (40 s against 11 s)."""
        work = jobs(*[("a", 0, 1)] * 40, *[("b", 0, 1)] * 40)
        fleet = dict(slots=2, cap=2, call_seconds=0.01, receive_seconds=0.04)
        capped = self.used(simulate(work, Policy(**fleet)), 30)
        even = self.used(simulate(work, Policy(**fleet, half_life=600)), 30)
        heavy_b = self.used(simulate(work, Policy(**fleet, half_life=600, weights={"b": 3})),
                            30)
        assert capped["a"] > 3 * capped["b"]
        assert even["a"] == pytest.approx(even["b"], rel=0.1)
        assert heavy_b["b"] >= 2.5 * heavy_b["a"]

    def test_weight_zero_pauses_a_tenant(self):
        """Under fair share weight 0 holds a tenant's jobs back as cap 0 does."""
        s = simulate(jobs(("a", 0, 5), ("p", 0, 5), ("a", 0, 5)),
                     Policy(slots=1, cap=4, weights={"p": 0}, half_life=60, defer_seconds=30))
        assert s.status == ("succeeded", "paused", "succeeded")
        assert starts(s) == [0, None, 5]

    def test_a_tenant_alone_gets_everything_its_cap_allows(self):
        """Fair share takes nothing from a lone tenant: it holds its cap throughout."""
        s = simulate(jobs(*[("a", 0, 1)] * 10), Policy(slots=8, cap=3, half_life=60).perfect())
        assert starts(s) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]

    def test_without_a_half_life_weights_change_nothing(self):
        """Half-life 0 is the count caps alone: the same schedule, whatever the weights."""
        work = jobs(*[("a", 0, 1 + n % 3) for n in range(12)], *[("b", 1, 2)] * 6)
        base = simulate(work, Policy(slots=4, cap=2, call_seconds=0.01))
        weighted = simulate(work, Policy(slots=4, cap=2, call_seconds=0.01,
                                         weights={"a": 5, "b": 0}))
        assert weighted.attempts == base.attempts

    def test_bad_weights_and_half_lives_are_refused(self):
        """A negative weight or half-life is a mistake, said in words."""
        with pytest.raises(ConfigError, match="weights"):
            Policy(weights={"a": -1})
        with pytest.raises(ConfigError):
            Policy(half_life=-5)


class TestViewReads:
    """``ViewRead``: every ``redrive_seconds`` the hosts read who waits, and a host with a
    free slot starts parked jobs no hand-off reached (``Refiller.restart_parked``)."""

    WORK = (("globex", 0.0, 0.5), ("acme", 0.001, 0.5), ("acme", 0.002, 0.5))

    def policy(self, **kw) -> Policy:
        return Policy(slots=3, cap=4, caps={"acme": 1}, park_seconds=60.0, defer_seconds=1.0,
                      poll_seconds=1, call_seconds=0.01, receive_seconds=0.02,
                      half_life=600.0, **kw)

    def test_a_parked_job_no_release_handed_over_starts_at_a_view_read(self):
        """acme's second job is parked (fair share holds it: globex was just seen); no
        release hands it over. A read of the view once globex's demand has passed starts
        it, seconds in; with no view reads it waits for its park window."""
        read = simulate(jobs(*self.WORK), self.policy(redrive_seconds=0.5))
        unread = simulate(jobs(*self.WORK), self.policy(redrive_seconds=0.0))
        assert (read.counts["redriven"], read.counts["park_expired"]) == (1, 0)
        assert read.first_start[2] < 10
        assert (unread.counts["redriven"], unread.counts["park_expired"]) == (0, 1)
        assert unread.first_start[2] >= 60

    def test_view_reads_stop_while_nothing_is_parked(self):
        """A read can start only parked work: none is simulated while nothing is parked,
        so a workload a year from the clock's zero (a replay of records) ends as soon."""
        late = [(tenant, at + 365 * 86400, run) for tenant, at, run in self.WORK]
        s = simulate(jobs(*late), self.policy(redrive_seconds=0.5))
        assert s.counts["redriven"] == 1
        assert all(x == "succeeded" for x in s.status)
