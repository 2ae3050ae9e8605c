"""Shared fixtures: the local AWS stack, a real redis-server, real PDFs; stress mode.

Fixture modules live in ``tests/fixtures/``. With ``IMPOSER_TEST_STRESS=1`` the
whole session runs beside one CPU burner per core, as on a busy CI machine:
a test that passes alone but not then waits on the clock instead of on a
condition.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest_plugins = [
    "tests.fixtures.aws",
    "tests.fixtures.pdfs",
    "tests.fixtures.redis_server",
    "tests.fixtures.logs",
]


@pytest.hookimpl(hookwrapper=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (setup.cfg): one worker more than xdist's own count (the physical cores).
    Many tests spend most of their time waiting on real subprocesses (workers, the local
    AWS stack, pool children), so a third worker on two cores keeps both busy.
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still sets the count exactly."""
    outcome = yield
    if not os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        outcome.force_result(outcome.get_result() + 1)


@pytest.fixture(scope="session", autouse=True)
def stress():
    """Keep every core busy for the session when IMPOSER_TEST_STRESS=1."""
    if os.environ.get("IMPOSER_TEST_STRESS") != "1" or \
            os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":  # one set for the machine
        yield []
        return
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(os.cpu_count() or 2)]
    try:
        yield burners
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
