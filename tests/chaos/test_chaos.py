"""A short seeded fault-injection run against real `imposer run` hosts (``tests/fixtures/chaos``).

About two minutes: two hosts of three slots behind fault proxies, three
tenants, every fault kind at least once in a seeded order, then every
invariant. When it fails, the assertion message is the fault x violation
table with each violation explained; ``scripts/chaos.py --seed ...`` with the
same settings reproduces the run outside pytest (the logs stay in tmp_path).
"""

from __future__ import annotations

import pytest

from tests.fixtures.chaos import FAULT_KINDS, Config, run

pytestmark = pytest.mark.slow

#: The CI run: every kind once (in an order the seed picks), then a few more at random.
SHORT = Config(seed=20261202, faults=len(FAULT_KINDS) + 5, hosts=2, slots=3,
               tenants=(("acme", 1), ("globex", 2), ("initech", 2)),
               fault_every=(1.5, 3.0), backlog=8, settle_seconds=180.0)


class TestChaos:
    def test_short_seeded_run_holds_every_invariant(self, aws_endpoint, tmp_path):
        """Every fault kind leaves no tenant over its cap, no job lost or re-run, one plate and one webhook each."""
        report = run(SHORT, tmp_path, aws_endpoint, progress=print)
        print(report.render(faults=True))
        assert {f.kind for f in report.faults} == set(FAULT_KINDS)
        assert report.violations == [], report.render()
