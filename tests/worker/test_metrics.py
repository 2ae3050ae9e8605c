"""Metrics: EMF records, the stranded/shortage split, and what the parent emits."""

from __future__ import annotations

import logging
import time

import pytest

from imposer.client import submit
from imposer.clock import ManualClock
from imposer.metrics import Metrics
from imposer.models import TenantConfig
from imposer.worker.dispatch.contention import ContentionMeter
from imposer.worker.dispatch.pool import Pool
from imposer.worker.wiring import build, connect
from tests.fixtures.pdfs import numbered_pdf
from tests.fixtures.workers import FAKE, layout, wait_for


class TestMetrics:
    def test_emf_record_shape(self, logged):
        """A data point is one JSON line: the _aws envelope, value and dimensions at top level."""
        clock = ManualClock(start=1_800_000_000)
        Metrics("imposer-test", clock).emit("cap_defer", 1, tenant_id="acme")
        line = logged()[-1]
        assert line["_aws"] == {"Timestamp": 1_800_000_000_000, "CloudWatchMetrics": [{
            "Namespace": "imposer-test", "Dimensions": [["tenant_id"]],
            "Metrics": [{"Name": "cap_defer", "Unit": "Count"}]}]}
        assert (line["cap_defer"], line["tenant_id"], line["action"]) == (1, "acme", "metric")
        assert "emf" not in line

    def test_metric_lines_are_written_whatever_the_log_level(self, logged):
        """IMPOSER_LOG_LEVEL=WARNING quiets chatter, never the lines the dashboard reads."""
        logged("WARNING")
        logging.getLogger("imposer.worker.dispatch.dispatcher").info("chatter")
        Metrics().emit("slot_utilisation", 50.0, host="h1")
        assert [r["message"] for r in logged()] == ["metric slot_utilisation=50.0"]

    @pytest.mark.parametrize("name, value, dims, why", [
        ("cap_defers", 1, {"tenant_id": "a"}, "is not in imposer.metrics.CATALOGUE"),
        ("cap_defer", 1, {"tenant_id": "a", "host": "h"}, "are not the catalogue's"),
        ("cap_defer", 1, {}, "are not the catalogue's"),
        ("queue_wait", float("nan"), {"tenant_id": "a"}, "is not a finite number"),
        ("cap_defer", 1, {"tenant_id": "caf\u00e9"}, "not ASCII"),
    ])
    def test_what_cloudwatch_would_refuse_is_an_error_line_without_envelope(
            self, logged, name, value, dims, why):
        """An undeclared metric or dimension set, or a bad value, is logged as an error."""
        Metrics().emit(name, value, **dims)
        line, = logged()
        assert (line["level"], line["action"], "_aws" in line) == ("ERROR", "metric_invalid",
                                                                  False)
        assert why in line["message"]

    def test_totals_filter_by_dimension(self):
        """Totals add up per metric and can be narrowed by any dimension."""
        metrics = Metrics()
        metrics.emit("lease_recovered", 1, tenant_id="a", host="h1")
        metrics.emit("lease_recovered", 1, tenant_id="a", host="h2")
        metrics.emit("lease_recovered", 1, tenant_id="b", host="h1")
        assert metrics.total("lease_recovered") == 3
        assert metrics.total("lease_recovered", tenant_id="a") == 2
        assert metrics.total("lease_recovered", host="h1") == 2


class TestContention:
    def make(self, slots=8):
        clock = ManualClock()
        metrics = Metrics(clock=clock)
        return ContentionMeter(slots, window=300, clock=clock, metrics=metrics, host="h"), clock, \
            metrics

    def test_idle_slots_while_capped_tenant_waits_are_stranded(self):
        """Four idle slots and ten capped jobs waiting for 100 s strand 400 slot-seconds."""
        meter, clock, metrics = self.make()
        meter.sample(busy=4, queued=0)
        for n in range(10):
            meter.deferred("heavy", f"j{n}")
        clock.advance(100)
        assert meter.sample(busy=4, queued=0) == (400, 100, 0)
        assert metrics.total("stranded_seconds", host="h") == 400

    def test_stranded_bounded_by_waiting_jobs(self):
        """Only as many idle slots as there are capped jobs waiting count as stranded."""
        meter, clock, _ = self.make()
        meter.sample(busy=2, queued=0)
        meter.deferred("heavy", "j1")
        meter.deferred("heavy", "j2")
        clock.advance(10)
        assert meter.sample(busy=2, queued=0) == (20, 10, 0)

    def test_full_pool_with_queued_work_is_shortage(self):
        """All slots busy with messages waiting is shortage, not stranded capacity."""
        meter, clock, metrics = self.make()
        meter.sample(busy=8, queued=5)
        meter.deferred("heavy", "j1")
        clock.advance(7)
        assert meter.sample(busy=8, queued=5) == (0, 0, 7)
        assert metrics.total("shortage_seconds") == 7

    def test_started_and_stale_deferrals_stop_counting(self):
        """A deferred job that started, or was last deferred long ago, no longer strands."""
        meter, clock, _ = self.make()
        meter.sample(busy=0, queued=0)
        meter.deferred("heavy", "j1")
        meter.deferred("heavy", "j2")
        meter.started("j1")
        clock.advance(5)
        assert meter.sample(busy=0, queued=0) == (5, 5, 0)
        clock.advance(301)
        assert meter.capped_waiting() == 0


class TestParentEmits:
    def test_cap_defer_and_queue_wait_values(self, settings, tmp_path):
        """One pass over the queue emits queue wait from submission and cap_defer for the overflow."""
        clock = ManualClock(start=time.time())
        settings = settings.evolve(slots=2, engine="pdftoolbox", pdftoolbox=str(FAKE))
        backends = connect(settings, clock=clock)
        backends.tenants.put(TenantConfig(tenant_id="acme", cap=1))
        pdf = numbered_pdf(tmp_path / "art.pdf", 2)
        sent = [submit("acme", pdf, layout(), bucket=settings.bucket,
                       queue=settings.queue_name).submitted_at for _ in range(2)]
        clock.advance(max(sent) + 42 - clock.time())  # however long submitting took under load
        supervisor = build(settings, backends=backends, pool=Pool(2, settings))
        supervisor.pool.start()
        try:
            wait_for(lambda: (supervisor.fill_free_slots(),
                              backends.metrics.total("cap_defer") >= 1)[1], 30, "a cap deferral")
            assert backends.metrics.total("cap_defer", tenant_id="acme") == 1
            assert backends.metrics.count("queue_wait") == 1
            wait = backends.metrics.total("queue_wait")  # of whichever job started
            assert any(wait == pytest.approx(max(sent) + 42 - t, abs=0.002) for t in sent)
            assert supervisor.dispatch.deferral.contention.capped_waiting() == 1
        finally:
            supervisor.pool.stop(timeout=0)
