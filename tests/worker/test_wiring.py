"""The composition root: ``wiring.build`` makes every part of the parent, once, and joins them."""

from __future__ import annotations

from imposer.worker.dispatch.pool import Pool
from imposer.worker.supervisor import Supervisor, Until
from imposer.worker.wiring import build


class TestBuild:
    def test_every_part_shares_one_clock_one_metrics_and_one_running_table(self, settings,
                                                                           backends):
        """The loop, the dispatcher, the launcher, the settler, the completer, the refill,
        the intake and the share rule read one clock, emit to one metrics sink and keep
        their jobs in one running table (the backends' clock and metrics)."""
        supervisor = build(settings, backends=backends, pool=Pool(1, settings))
        assert isinstance(supervisor, Supervisor)
        d, settler, completer = supervisor.dispatch, supervisor.settler, supervisor.reaper.completer
        parts = [supervisor.reaper, supervisor.startup, d, d.launcher, d.deferral, settler,
                 settler.successors, completer, completer.ending, supervisor.refill.starts,
                 supervisor.intake, supervisor.dispatch.shares, supervisor.stops, d.handoff]
        assert {id(p.clock) for p in parts} == {id(backends.clock)}
        assert {id(p.metrics) for p in (d, d.launcher, d.vet, d.deferral,
                                        settler.successors, completer.ending,
                                        supervisor.refill.starts)} == \
            {id(backends.metrics)}
        assert completer.ending.messages is supervisor.intake.messages, "one Messages"
        assert {id(t) for t in (supervisor.running, d.launcher.running, settler.running,
                                supervisor.reaper.completer.table, supervisor.reaper.running,
                                supervisor.dispatch.shares.running)} == \
            {id(supervisor.running)}
        assert d.duplicates.storage is supervisor.reaper.completer.storage
        assert {id(p.pool) for p in (supervisor, supervisor.reaper, supervisor.startup,
                                     d.launcher, settler, settler.promiser,
                                     settler.successors, supervisor.intake)} == \
            {id(supervisor.pool)}
        assert settler.promiser.starts is supervisor.refill.starts, "one starter of parked jobs"
        assert {id(p.handoff) for p in (d, settler.promiser, settler.successors)} == \
            {id(d.handoff)}
        assert {id(p.timing) for p in (supervisor.intake.messages, d.launcher, d.handoff)} == \
            {id(supervisor.intake.messages.timing)}, "one LeaseTiming, built in the composition root"
        assert {id(p.memo) for p in (d, supervisor.refill, settler.promiser,
                                     supervisor.intake)} == {id(d.memo)}, "one cap memo"
        assert d.memo.clock is backends.clock

    def test_the_settler_asks_the_parent_to_look_at_the_queue(self, settings, backends):
        """The one cycle of the parent (the intake refills through the refiller; a promise
        looks at the queue) is joined by the parent loop alone: the settler holds no
        look and no intake, and a settle's ``LOOK`` step is answered by the supervisor
        through the intake's look (the look itself, against SQS:
        ``test_handoff``'s last-slot tests)."""
        supervisor = build(settings, backends=backends, pool=Pool(1, settings))
        assert supervisor.intake.refill is supervisor.settler.refill, "one refiller"
        for part in (supervisor.settler, supervisor.settler.promiser, supervisor.refill):
            assert not hasattr(part, "look") and not hasattr(part, "intake")

    def test_the_share_view_thread_runs_only_under_fair_share(self, settings, backends):
        """Fair share off: no share-view pass; on: one, beside the other side threads."""
        off = build(settings, backends=backends, pool=Pool(1, settings))
        names = [t.name for t in off.threads]
        assert names == ["lease-renewer", "message-holder", "sweep", "utilisation",
                         "rollups", "waiting-view", "webhooks"]
        shared = settings.evolve(share_half_life=600.0)
        on = build(shared, backends=backends, pool=Pool(1, shared))
        assert "share-view" in [t.name for t in on.threads]
        assert on.dispatch.shares.enabled and not off.dispatch.shares.enabled
        assert off.startup.threads is off.threads, "the boot starts the threads health checks"
        # the boot reads each background view once, as its thread will: borrowing's, then
        # fair share's only when it is on
        assert [what for what, _ in off.startup.views] == ["borrow view"] * settings.borrow
        assert [what for what, _ in on.startup.views] == ["borrow view"] * shared.borrow + [
            "share view"]

    def test_without_backends_it_connects_from_the_settings(self, settings):
        """``build(settings)`` alone connects the stores itself, and sizes the pool and the
        limits from the settings."""
        supervisor = build(settings, max_jobs=3, exit_when_idle=True)
        assert supervisor.settings is settings
        assert len(supervisor.pool.slots) == settings.slots
        assert supervisor.until == Until(max_jobs=3, idle=True)
        assert supervisor.dispatch.leases.table == settings.leases_table
