"""``imposer layouts`` and ``imposer impose`` through click's CliRunner."""

from __future__ import annotations

import json
import re

import pikepdf
import pytest
from click.testing import CliRunner

from imposer.cli import main
from imposer.cli.engine import impose_command, layouts_command
from imposer.engine import load_layout
from imposer.engine.presets import preset_names

MM = 72 / 25.4


@pytest.fixture
def runner():
    return CliRunner()


class TestLayouts:
    def test_table(self, runner):
        """The table lists every preset with its kind and sheet."""
        result = runner.invoke(layouts_command, [])
        assert result.exit_code == 0
        lines = result.stdout.splitlines()
        assert lines[0].split()[:3] == ["NAME", "KIND", "SHEET"]
        for name in preset_names():
            layout = load_layout(name)
            row = next(line for line in lines if line.startswith(name + " "))
            assert layout.kind.value in row and layout.sheet.label in row

    def test_json(self, runner):
        """--json gives name, kind, sheet and a spec that loads back to the preset."""
        result = runner.invoke(layouts_command, ["--json"])
        assert result.exit_code == 0
        data = json.loads(result.stdout)
        assert [d["name"] for d in data] == preset_names()
        for entry in data:
            layout = load_layout(entry["name"])
            assert entry["kind"] == layout.kind.value
            assert entry["sheet"] == layout.sheet.label
            assert load_layout(entry["spec"]) == layout


class TestImpose:
    def test_preset(self, runner, make_pdf, tmp_path):
        """A preset name imposes the PDF and prints one summary line."""
        src, out = make_pdf(16, width=148 * MM, height=210 * MM), tmp_path / "out.pdf"
        result = runner.invoke(impose_command, ["a5-booklet-a4", str(src), str(out)])
        assert result.exit_code == 0, result.output
        assert re.fullmatch(
            r"4 sheets \(8 sides\) of 841\.89 x 595\.28 pt \(297 x 210 mm\), 16 pages placed "
            r"from 16 input pages, 0 blank cells, in \d+\.\d\d s -> .*out\.pdf\n",
            result.stdout)
        with pikepdf.open(out) as pdf:
            assert len(pdf.pages) == 8

    def test_layout_file(self, runner, make_pdf, tmp_path):
        """A JSON layout file works wherever a preset name does."""
        spec = tmp_path / "twoup"
        spec.write_text(json.dumps({"version": 1, "kind": "nup", "grid": {"cols": 2, "rows": 1},
                                    "sheet": {"size": "A3", "orientation": "landscape"}}))
        src, out = make_pdf(4), tmp_path / "out.pdf"
        result = runner.invoke(impose_command, [str(spec), str(src), str(out)])
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("2 sheets (2 sides) of 1190.55 x 841.89 pt")

    def test_bad_layout(self, runner, make_pdf, tmp_path):
        """A bad layout exits 2 with one line on stderr naming the field."""
        spec = tmp_path / "bad.json"
        spec.write_text(json.dumps({"version": 1, "kind": "nup", "sheet": "A3", "bleed": "x"}))
        result = runner.invoke(impose_command, [str(spec), str(make_pdf(1)),
                                                str(tmp_path / "o.pdf")])
        assert result.exit_code == 2
        assert result.stderr.startswith("imposer: bad_layout: layout field 'bleed': ")
        assert result.stderr.count("\n") == 1 and result.stdout == ""

    def test_bad_pdf(self, runner, tmp_path):
        """A corrupt input PDF exits 2 with the reason."""
        bad = tmp_path / "bad.pdf"
        bad.write_bytes(b"%PDF-1.7\nnothing here")
        result = runner.invoke(impose_command, ["a5-booklet-a4", str(bad),
                                                str(tmp_path / "o.pdf")])
        assert result.exit_code == 2
        assert result.stderr.startswith("imposer: bad_pdf: input PDF is corrupt")

    def test_unwritable_output(self, runner, make_pdf, tmp_path):
        """An output in a missing directory exits 1, not 2: the input was fine."""
        src = make_pdf(4, width=148 * MM, height=210 * MM)
        result = runner.invoke(main, ["impose", "a5-booklet-a4", str(src),
                                      str(tmp_path / "no" / "o.pdf")])
        assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
        assert result.stderr.startswith("imposer: error: Could not open file ")
        assert "no directory" in result.stderr
