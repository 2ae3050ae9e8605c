"""The layout spec: units, parsing, presets, round trips and field-named rejections."""

from __future__ import annotations

import json

import pytest

from imposer.engine import Kind, Layout, list_presets, load_layout
from imposer.engine.presets import preset_names
from imposer.engine.units import parse_length
from imposer.errors import LayoutError

MM = 72 / 25.4


def spec(**fields) -> dict:
    """Return a minimal valid n-up spec with *fields* replaced."""
    data = {"version": 1, "kind": "nup", "sheet": "SRA3", "grid": {"cols": 2, "rows": 1}}
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


class TestUnits:
    def test_mm_is_exact(self):
        """A millimetre is exactly 72/25.4 pt, not a TeX point."""
        assert parse_length(210, "mm") == 210 * 72 / 25.4
        assert parse_length("25.4mm", "pt") == pytest.approx(72.0, abs=1e-12)

    def test_strings_carry_their_own_unit(self):
        """A string length ignores the spec's unit: '8.5in' is 612 pt anywhere."""
        assert parse_length("8.5in", "mm") == 612.0
        assert parse_length("12pt", "mm") == 12.0
        assert parse_length("1cm", "pt") == pytest.approx(10 * MM)

    def test_units_field_applies_to_numbers(self):
        """``units: in`` makes a bare number inches."""
        layout = load_layout(spec(units="in", bleed=0.125, gutter=0.25))
        assert layout.bleed == 9.0
        assert layout.gutter.x == 18.0


class TestSheet:
    def test_named_sizes(self):
        """Named sizes resolve case-insensitively to their exact point sizes."""
        cases = {"a4": (595.2756, 841.8898), "SRA3": (907.0866, 1275.5906),
                 "Letter": (612, 792), "tabloid": (792, 1224), "A3": (841.8898, 1190.5512)}
        for name, (w, h) in cases.items():
            sheet = load_layout(spec(sheet=name)).sheet
            assert (sheet.width, sheet.height) == pytest.approx((w, h), abs=1e-4)

    def test_orientation_turns_the_sheet(self):
        """Landscape puts the long side across; portrait puts it up."""
        land = load_layout(spec(sheet={"size": "A4", "orientation": "landscape"})).sheet
        assert land.width > land.height
        port = load_layout(spec(sheet={"width": 450, "height": 320,
                                       "orientation": "portrait"})).sheet
        assert (port.width, port.height) == pytest.approx((320 * MM, 450 * MM))

    def test_explicit_size_as_given(self):
        """Width and height without orientation are used as written."""
        sheet = load_layout(spec(sheet={"width": "18in", "height": "12in"})).sheet
        assert (sheet.width, sheet.height) == (1296.0, 864.0)
        assert sheet.size is None


class TestDefaults:
    def test_booklet_defaults(self):
        """A saddle spec gets a 2 x 1 grid and work-and-turn without saying so."""
        layout = load_layout({"version": 1, "kind": "saddle", "sheet": "A3"})
        assert (layout.grid.cols, layout.grid.rows) == (2, 1)
        assert layout.duplex == "work_and_turn"
        assert layout.kind is Kind.SADDLE and layout.kind == "saddle"

    def test_perfect_has_signatures(self):
        """A perfect-bound spec defaults to 4-sheet signatures."""
        layout = load_layout({"version": 1, "kind": "perfect", "sheet": "A3"})
        assert layout.signature_sheets == 4

    def test_marks_true_uses_default_sizes(self):
        """``marks: true`` means 5 mm marks, 2 mm beyond the bleed, 0.25 pt lines."""
        marks = load_layout(spec(marks=True)).marks
        assert (marks.length, marks.offset, marks.line_width) == pytest.approx(
            (5 * MM, 2 * MM, 0.25))

    def test_grid_auto_for_step_repeat(self):
        """Leaving out the grid of a step-and-repeat spec means fill the sheet."""
        layout = load_layout(spec(kind="step_repeat", grid=None))
        assert layout.grid is None


class TestLoadLayout:
    def test_preset_by_name(self):
        """A bare name loads the shipped preset of that name."""
        layout = load_layout("a5-booklet-a4")
        assert layout.name == "a5-booklet-a4" and layout.kind is Kind.SADDLE

    def test_preset_reference_dict(self):
        """``{"preset": NAME}`` names a preset too."""
        assert load_layout({"preset": "a5-4up-sra3"}) == load_layout("a5-4up-sra3")

    def test_file_by_str_and_path(self, tmp_path):
        """A JSON file loads by str path or Path."""
        path = tmp_path / "mine.json"
        path.write_text(json.dumps(spec(name="mine")))
        assert load_layout(str(path)) == load_layout(path)
        assert load_layout(path).name == "mine"

    def test_every_kind_has_a_preset(self):
        """At least one preset ships per layout kind, each named after its file."""
        presets = list_presets()
        assert {p.kind for p in presets} == set(Kind)
        assert [p.name for p in presets] == preset_names()

    @pytest.mark.parametrize("name", preset_names())
    def test_round_trip(self, name):
        """to_dict() of every preset loads back into an equal Layout."""
        layout = load_layout(name)
        assert load_layout(json.loads(json.dumps(layout.to_dict()))) == layout

    def test_round_trip_inline_mm(self):
        """An inline spec in mm survives to_dict() and back exactly."""
        layout = load_layout(spec(bleed=3, gutter={"x": 6, "y": 8}, margins={"top": 10},
                                  marks={"length": 4}, page_box="cropbox",
                                  mixed_sizes="center", duplex="work_and_turn"))
        assert load_layout(layout.to_dict()) == layout
        assert layout.page_box == "CropBox"


class TestPdfToolbox:
    def test_profile_and_variables(self):
        """Variables fill their placeholders from the layout, ready for --setvariable."""
        layout = load_layout(spec(bleed=3, gutter=6, pdftoolbox={
            "profile": "Impose.kfpx",
            "variables": {"Cols": "{cols}", "Bleed": "{bleed_mm}", "Sheet": "{sheet}",
                          "Fixed": 7, "Flag": True, "Brace": "{{x}}"}}))
        assert layout.pdftoolbox_profile == "Impose.kfpx"
        assert layout.pdftoolbox_variables == {
            "Cols": "2", "Bleed": "3", "Sheet": "SRA3", "Fixed": "7", "Flag": "true",
            "Brace": "{x}"}

    def test_no_mapping(self):
        """A spec without pdftoolbox has no profile and no variables."""
        layout = load_layout(spec())
        assert layout.pdftoolbox_profile is None and layout.pdftoolbox_variables == {}


REJECTIONS = [
    (spec(version=None), "layout field 'version': missing (required)"),
    (spec(version=2), "layout field 'version': this engine reads version 1"),
    (spec(kind="booklet"), "layout field 'kind': want one of step_repeat, nup, saddle, perfect"),
    (spec(sheet="B7"), "layout field 'sheet.size': unknown sheet size 'B7'; want one of A5, "),
    (spec(sheet={"width": -10, "height": 300}), "layout field 'sheet.width': must be > 0"),
    (spec(sheet={"width": 300}), "layout field 'sheet.height': missing (required)"),
    (spec(sheet={"size": "A4", "width": 10}), "layout field 'sheet.width': give either"),
    (spec(sheet={"size": "A4", "orientation": "sideways"}),
     "layout field 'sheet.orientation': want one of portrait, landscape"),
    (spec(grid={"cols": 0, "rows": 1}), "layout field 'grid.cols': want a whole number"),
    (spec(grid={"cols": 2.5, "rows": 1}), "layout field 'grid.cols': want a whole number"),
    (spec(bleed=3, gutter=5), "layout field 'gutter.x': 5 mm (14.17 pt) is less than 2 x bleed"),
    (spec(bleed=3, gutter={"x": 6, "y": 2}, grid={"cols": 2, "rows": 2}),
     "layout field 'gutter.y': 2 mm"),
    (spec(bleed="3 furlongs"), "layout field 'bleed': want a number or a string like '3mm'"),
    (spec(bleed=-1), "layout field 'bleed': must be >= 0"),
    (spec(units="cubits"), "layout field 'units': want one of pt, mm, cm, in"),
    (spec(page_box="FooBox"), "layout field 'page_box': want one of TrimBox"),
    (spec(gutters=6), "layout field 'gutters': unknown field (did you mean 'gutter'?)"),
    (spec(marks={"length": 0}), "layout field 'marks.length': must be > 0"),
    (spec(marks={"colour": "red"}), "layout field 'marks.colour': unknown field"),
    (spec(duplex="tumble"), "layout field 'duplex': want one of none, work_and_turn"),
    (spec(kind="saddle", grid={"cols": 2, "rows": 2}), "layout field 'grid': a saddle layout"),
    (spec(kind="saddle", grid=None, duplex="none"), "layout field 'duplex': a saddle sheet"),
    (spec(kind="perfect", grid=None, gutter={"x": 5}), "layout field 'gutter.x': booklet"),
    (spec(signature_sheets=4), "layout field 'signature_sheets': only a perfect-bound"),
    (spec(kind="perfect", grid=None, signature_sheets=0),
     "layout field 'signature_sheets': want a whole number from 1 to 64"),
    (spec(margins=250), "layout field 'margins': leave no room"),
    (spec(margins=[1, 2]), "layout field 'margins': want a length or an object"),
    (spec(name="no spaces"), "layout field 'name': want letters"),
    (spec(mixed_sizes="shrink"), "layout field 'mixed_sizes': want one of refuse, center"),
    (spec(pdftoolbox={"variables": {"a:b": "1"}}),
     "layout field 'pdftoolbox.variables.a:b': a variable name"),
    (spec(pdftoolbox={"variables": {"X": "{nonsense}"}}),
     "layout field 'pdftoolbox.variables.X': unknown placeholder {nonsense}"),
    (spec(kind="step_repeat", grid=None, pdftoolbox={"variables": {"X": "{cols}"}}),
     "layout field 'pdftoolbox.variables.X': {cols} needs a fixed grid"),
    (spec(pdftoolbox={"profile": ""}), "layout field 'pdftoolbox.profile': want a profile"),
]


class TestRejections:
    @pytest.mark.parametrize("data, message", REJECTIONS,
                             ids=[m.split(":")[0][:48] for _, m in REJECTIONS])
    def test_malformed_spec(self, data, message):
        """Each malformed spec raises LayoutError naming its field and the fault."""
        with pytest.raises(LayoutError) as info:
            load_layout(data)
        assert str(info.value).startswith(message)
        assert info.value.kind == "bad_layout"

    def test_unknown_preset(self):
        """An unknown preset name is refused with the list of known ones."""
        with pytest.raises(LayoutError, match="unknown layout preset 'nope'; presets: a4-"):
            load_layout("nope")

    def test_missing_file(self, tmp_path):
        """A path to no file says the file is missing."""
        with pytest.raises(LayoutError, match="not found"):
            load_layout(tmp_path / "absent.json")

    def test_bad_json(self, tmp_path):
        """A file that is not JSON says so, with the position."""
        path = tmp_path / "bad.json"
        path.write_text('{"version": 1,,}')
        with pytest.raises(LayoutError, match=r"is not valid JSON: .*line 1 column 15"):
            load_layout(path)

    def test_file_not_an_object(self, tmp_path):
        """A JSON file holding a list, not an object, is refused as such."""
        path = tmp_path / "list.json"
        path.write_text("[1, 2]")
        with pytest.raises(LayoutError, match="^layout: want a JSON object, got a list$"):
            load_layout(path)

    def test_wrong_source_type(self):
        """A source that is neither name, path nor dict is a LayoutError, not a TypeError."""
        with pytest.raises(LayoutError, match="not int"):
            load_layout(42)

    def test_layout_is_frozen(self):
        """A Layout cannot be changed after validation."""
        layout = load_layout(spec())
        with pytest.raises(AttributeError):
            layout.bleed = 5  # type: ignore[misc]
        assert isinstance(layout, Layout)
