"""The harness signals the incarnation a fault chose, never the one that replaced it."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.fixtures.chaos.cluster import Host

#: Prints the signals it gets; SIGWINCH (28) also ends it. Python runs pending handlers
#: in signal-number order, so a SIGTERM (15) sent before the SIGWINCH always prints first.
LISTENER = """
import signal, sys
def on(sig, _):
    print(signal.Signals(sig).name, flush=True)
    if sig == signal.SIGWINCH:
        sys.exit(0)
signal.signal(signal.SIGTERM, on)
signal.signal(signal.SIGWINCH, on)
print("ready", flush=True)
while True:
    signal.pause()
"""


@pytest.fixture
def listener():
    proc = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def bare_host(proc: subprocess.Popen, incarnation: int) -> Host:
    """A Host without its proxy or stack: only what signalling reads."""
    host = Host.__new__(Host)
    host.proc, host.incarnation = proc, incarnation
    return host


def signals_seen(proc: subprocess.Popen) -> list[str]:
    proc.send_signal(signal.SIGWINCH)  # the listener reports it and exits
    out, _ = proc.communicate(timeout=30)
    return out.split()


class TestSecondSigterm:
    def test_reaches_the_incarnation_it_was_meant_for(self, listener):
        host = bare_host(listener, incarnation=2)
        assert host.term_again(2) is True
        assert signals_seen(listener) == ["SIGTERM", "SIGWINCH"]

    def test_skips_a_restarted_host(self, listener):
        """The second SIGTERM of a fast stop fires after the host restarted: nothing is sent."""
        host = bare_host(listener, incarnation=3)  # 2 was asked to stop, exited, restarted
        assert host.term_again(2) is False
        assert signals_seen(listener) == ["SIGWINCH"]
