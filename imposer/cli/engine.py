"""``imposer layouts`` and ``imposer impose``: the engine from the command line.

Both run locally (no AWS), so anyone can try a layout on a PDF. A bad layout
or PDF prints one line to stderr and exits 2. The engine (and pikepdf) is
imported when a command runs, not when `imposer` starts: other commands never
pay for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from imposer.cli.common import MAX_PDF_MB, InputFile, OutputFile, fail
from imposer.errors import ImposerError, InputPdfError, LayoutError, TooLarge
from imposer.models.exits import Exit


@click.command("layouts")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: each preset and its spec.")
def layouts_command(as_json: bool) -> None:
    """List the built-in layout presets with their kind and sheet."""
    from imposer.engine.presets import list_presets

    try:
        presets = list_presets()
    except LayoutError as exc:
        fail(f"bad built-in preset: {exc}", Exit.FAILED)
    if as_json:
        click.echo(json.dumps([{
            "name": p.name, "kind": p.kind.value, "sheet": p.sheet.label,
            "sheet_width_pt": round(p.sheet.width, 4), "sheet_height_pt": round(p.sheet.height, 4),
            "description": p.description, "spec": p.to_dict(),
        } for p in presets], indent=2))
        return
    rows = [(p.name or "", p.kind.value, p.sheet.label, p.description or "") for p in presets]
    widths = [max(len(r[i]) for r in rows + [("NAME", "KIND", "SHEET", "")]) for i in range(3)]
    for row in [("NAME", "KIND", "SHEET", "DESCRIPTION")] + rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])


def layout_of(text: str) -> Path | str:
    """A LAYOUT argument: the JSON file of that name if there is one, else the text itself
    (a preset name, or a path the engine then refuses in words)."""
    try:
        return Path(text) if Path(text).is_file() else text
    except (OSError, ValueError):  # a name too long for a path, or one with a NUL
        return text


@click.command("impose")
@click.argument("layout")
@click.argument("in_pdf", type=InputFile(MAX_PDF_MB))
@click.argument("out_pdf", type=OutputFile())
def impose_command(layout: str, in_pdf: str, out_pdf: Path) -> None:
    """Impose IN_PDF onto sheets by LAYOUT (a preset name or a JSON file) into OUT_PDF."""
    from imposer.engine.impose import impose
    from imposer.engine.presets import load_layout
    from imposer.engine.units import fmt, mm

    try:
        spec = load_layout(layout_of(layout))
        summary = impose(spec, in_pdf, out_pdf)
    except (LayoutError, InputPdfError, TooLarge) as exc:
        fail(str(exc), Exit.USAGE, kind=exc.kind)
    except (ImposerError, OSError) as exc:
        fail(f"cannot impose: {exc}", Exit.FAILED)
    w, h = summary.sheet_width, summary.sheet_height
    click.echo(
        f"{summary.sheets} sheets ({summary.sides} sides) of {fmt(w, 2)} x {fmt(h, 2)} pt "
        f"({fmt(mm(w), 1)} x {fmt(mm(h), 1)} mm), {summary.pages_placed} pages placed "
        f"from {summary.input_pages} input pages, {summary.blank_cells} blank cells, "
        f"in {summary.seconds:.2f} s -> {out_pdf}")
    for warning in summary.warnings:
        click.echo(f"warning: {warning}", err=True)
