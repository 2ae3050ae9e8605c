"""The demo's live view: redrawn in place on a terminal, one short line per tick otherwise."""

from __future__ import annotations

from imposer.dev.liveview import WIDTH, LiveView

TENANTS = ["noisy-print-co", "quiet-books", "quiet-cards", "quiet-flyers"]


def view(tty: bool, out: list):
    def echo(text="", nl=True):
        out.append(text + ("\n" if nl else ""))

    submitted = {t: ["j"] * n for t, n in zip(TENANTS, (60, 3, 3, 3))}
    return LiveView(held=lambda: {"noisy-print-co": 4, "quiet-cards": 1},
                    done=lambda: {"noisy-print-co": 10}, submitted=submitted, tenants=TENANTS,
                    slots=8, cap=4, tick=1.0, echo=echo, tty=tty)


class TestLiveView:
    def test_terminal_redraws_in_place_within_100_columns(self):
        """The second draw moves the cursor back over the first instead of scrolling."""
        out: list[str] = []
        v = view(True, out)
        v.draw()
        v.draw()
        first = out[0].splitlines()
        assert all(len(line) <= WIDTH for line in first)
        assert out[1].startswith(f"\x1b[{len(first)}F")
        assert "[####]       4      46    10" in out[0]

    def test_a_log_gets_one_short_line_per_tick(self):
        """Without a terminal each tick is one line, no escape codes, within 100 columns."""
        out: list[str] = []
        view(False, out).draw()
        (line,) = out
        assert "\x1b" not in line and len(line.rstrip("\n")) <= WIDTH
        assert "noisy-print-co 4/46/10 | books 0/3/0 | cards 1/2/0" in line
