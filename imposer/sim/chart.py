"""Draw the variants side by side: waits (quiet and heavy tenants) and utilisation."""

from __future__ import annotations

from typing import Sequence

from imposer.errors import ConfigError
from imposer.sim.variants import Row


def label(row: Row) -> str:
    p = row.figures.policy
    lend = f"borrow r{p.reserve}" if p.borrow else "no borrow"
    return f"{p.hosts}x{p.slots} cap {p.cap}\n{lend}"


def chart(rows: Sequence[Row], path: str, wait_threshold: float = 180.0) -> None:
    """Write a PNG: p95 waits per variant above, utilisation and long-wait share below."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        raise ConfigError("charts need matplotlib: pip install 'imposer[chart]'") from None
    labels = [label(r) for r in rows]
    x = range(len(rows))
    fig, (top, bottom) = pyplot.subplots(2, 1, sharex=True,
                                         figsize=(max(6, len(rows) * 1.2), 6))
    width = 0.4
    top.bar([i - width / 2 for i in x], [r.figures.quiet.p95 or 0 for r in rows], width,
            label="quiet tenants, p95", color="tab:green")
    top.bar([i + width / 2 for i in x], [r.figures.heavy.p95 or 0 for r in rows], width,
            label="heavy tenants, p95", color="tab:red")
    top.axhline(wait_threshold, color="black", linestyle="--",
                label=f"{wait_threshold:g} s (licence rule)")
    top.set_ylabel("queue wait (s)")
    top.legend(loc="upper right", fontsize="small")
    bottom.bar([i - width / 2 for i in x], [100 * r.figures.utilisation for r in rows], width,
               label="utilisation", color="tab:blue")
    bottom.bar([i + width / 2 for i in x], [100 * r.figures.slow_share for r in rows], width,
               label=f"starts waiting > {wait_threshold:g} s", color="tab:orange")
    bottom.set_ylabel("%")
    bottom.set_ylim(0, 105)
    bottom.set_xticks(list(x))
    bottom.set_xticklabels(labels, fontsize="small")
    bottom.legend(loc="upper right", fontsize="small")
    fig.suptitle("imposer simulate: variants side by side")
    fig.tight_layout()
    fig.savefig(path)
    pyplot.close(fig)
