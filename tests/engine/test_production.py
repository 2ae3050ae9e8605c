"""Production layouts, each read back exact to 0.01 pt: creep, work-and-tumble, printer's marks."""

from __future__ import annotations

import re

import pikepdf
import pytest

from imposer.engine import impose, load_layout
from imposer.engine.printmarks import PATCHES
from imposer.errors import LayoutError
from tests.engine.test_engine import A5, MM, numbers, placements, texts
from tests.engine.test_fidelity import DPI, render


def saddle(**fields) -> dict:
    data = {"version": 1, "kind": "saddle", "sheet": {"size": "A4", "orientation": "landscape"}}
    data.update(fields)
    return data


class TestCreep:
    def test_saddle_shingling(self, make_pdf, tmp_path):
        """Sheet s of a 16-page booklet moves its pages s x 0.1 mm toward the fold; clips stop there."""
        out = tmp_path / "out.pdf"
        impose(load_layout(saddle(creep="0.1mm")), make_pdf(16, width=A5[0], height=A5[1]), out)
        fold = 148.5 * MM
        for number, side in enumerate(placements(out)):
            shift = (number // 2) * 0.1 * MM
            left, right = sorted(side, key=lambda p: p.clip[0])
            assert left.matrix[4] == pytest.approx(0.5 * MM + shift, abs=0.01)
            assert right.matrix[4] == pytest.approx(fold - shift, abs=0.01)
            assert left.clip == pytest.approx((0.5 * MM + shift, 0, fold, 210 * MM), abs=0.01)
            assert right.clip == pytest.approx((fold, 0, 296.5 * MM - shift, 210 * MM),
                                               abs=0.01)

    def test_perfect_creeps_per_signature(self, make_pdf, tmp_path):
        """In 2-sheet signatures the creep starts again at 0 on each signature's outer sheet."""
        layout = {"version": 1, "kind": "perfect", "sheet": {"size": "A4",
                  "orientation": "landscape"}, "signature_sheets": 2, "creep": "0.25mm"}
        out = tmp_path / "out.pdf"
        impose(load_layout(layout), make_pdf(16, width=A5[0], height=A5[1]), out)
        lefts = [min(side, key=lambda p: p.clip[0]).matrix[4] for side in placements(out)]
        expected = [(0.5 + 0.25 * s) * MM for s in (0, 0, 1, 1, 0, 0, 1, 1)]
        assert lefts == pytest.approx(expected, abs=0.01)

    def test_only_booklets(self):
        """Creep on an n-up layout is a layout error."""
        with pytest.raises(LayoutError, match="'creep': only a saddle or perfect-bound"):
            load_layout({"version": 1, "kind": "nup", "sheet": "A4", "creep": 0.1})


def tumble(**fields) -> dict:
    data = {"version": 1, "kind": "nup", "sheet": {"size": "SRA3", "orientation": "portrait"},
            "grid": {"cols": 2, "rows": 2}, "gutter": 6, "margins": {"top": 10},
            "duplex": "work_and_tumble"}
    data.update(fields)
    return data


class TestWorkAndTumble:
    def test_back_is_flipped_head_over_tail(self, make_pdf, tmp_path):
        """Each back page lies behind its front, mirrored top to bottom and turned 180 degrees."""
        out = tmp_path / "out.pdf"
        impose(load_layout(tumble()), make_pdf(8, width=A5[0], height=A5[1]), out)
        front, back = placements(out)
        height = 450 * MM
        by_label = {p.label: p for p in back}
        for page in front:
            n = int(page.label.split()[1])
            behind = by_label[f"Page {n + 1}"]
            x0, y0, x1, y1 = page.clip
            assert behind.clip == pytest.approx((x0, height - y1, x1, height - y0), abs=0.01)
            assert behind.matrix[:4] == (-1, 0, 0, -1)
            assert behind.matrix[4:] == pytest.approx((x1, height - y0), abs=0.01)
        assert texts(out)[1] == numbers(6, 8, 2, 4)

    def test_back_boxes_mirror_margins(self, make_pdf, tmp_path):
        """With a 10 mm top margin, the back's TrimBox is the front's mirrored top to bottom."""
        out = tmp_path / "out.pdf"
        impose(load_layout(tumble()), make_pdf(2, width=A5[0], height=A5[1]), out)
        with pikepdf.open(out) as pdf:
            front = [float(v) for v in pdf.pages[0].TrimBox]
            back = [float(v) for v in pdf.pages[1].TrimBox]
        assert back == pytest.approx([front[0], 450 * MM - front[3], front[2],
                                      450 * MM - front[1]], abs=0.01)

    def test_booklets_refuse_tumble(self):
        """A booklet sheet is work-and-turn only."""
        with pytest.raises(LayoutError, match="'duplex': a saddle sheet"):
            load_layout(saddle(duplex="work_and_tumble"))


def ink_box(path, page: int) -> tuple[float, float, float, float]:
    """Return the bounding box (x0, y0, x1, y1, mm from the bottom left) of all ink on a page."""
    width, height, data = render(path, page)
    rows = [r for r in range(height) if data[3 * width * r:3 * width * (r + 1)].strip(b"\xff")]
    cols = [c for c in range(width) if any(data[3 * (r * width + c):3 * (r * width + c) + 3]
                                             != b"\xff\xff\xff" for r in rows)]
    px = 25.4 / DPI
    return cols[0] * px, (height - 1 - rows[-1]) * px, (cols[-1] + 1) * px, (height - rows[0]) * px


#: Every printer's mark, 3 mm bleed: the block reaches 17 mm beyond its trims on each side.
ALL_MARKS = {"bleed": 3, "gutter": 6, "marks": {"length": 5, "offset": 2, "registration": True,
                                                "colour_bar": True, "slug": True}}


class TestDuplexMargins:
    @pytest.mark.parametrize("duplex, margins", [
        ("work_and_tumble", {"top": 5, "bottom": 60, "left": 10, "right": 10}),
        ("work_and_turn", {"top": 10, "bottom": 10, "left": 100, "right": 10}),
    ])
    def test_no_ink_in_either_sides_margins(self, make_pdf, tmp_path, poppler, duplex, margins):
        """With uneven margins, neither side of the sheet puts bleed or a mark in its margins."""
        layout = {"version": 1, "kind": "nup", "sheet": {"size": "SRA2", "orientation":
                  "portrait"}, "grid": {"cols": 2 if duplex == "work_and_tumble" else 1,
                  "rows": 2}, "duplex": duplex, "margins": margins, **ALL_MARKS}
        out = tmp_path / "out.pdf"
        # 148 x 230 mm pages: the block with its marks is 500 mm tall, too tall to sit in the
        # 575 mm between the front's margins without reaching into the back's 60 mm margin
        impose(load_layout(layout), make_pdf(4, width=148 * MM, height=230 * MM,
                                             trim_inset=3 * MM),
               out, slug_fields={"job_id": "J-1", "tenant_id": "acme"})
        slack = 25.4 / DPI  # one rendered pixel
        for page in (1, 2):  # the press is the same for both passes: its margins hold on each
            x0, y0, x1, y1 = ink_box(out, page)
            assert x0 >= margins["left"] - slack and 450 - x1 >= margins["right"] - slack
            assert y0 >= margins["bottom"] - slack and 640 - y1 >= margins["top"] - slack
            with pikepdf.open(out) as pdf:
                trim = [float(v) / MM for v in pdf.pages[page - 1].TrimBox]
            assert trim[1] - y0 >= 17 - slack  # the colour bar printed, under the block


def marked(**marks) -> dict:
    """An A5 page 1-up on A4 portrait, 3 mm bleed: trim x 31-179 mm, y 43.5-253.5 mm."""
    return {"version": 1, "kind": "nup", "sheet": {"size": "A4", "orientation": "portrait"},
            "grid": {"cols": 1, "rows": 1}, "bleed": 3,
            "marks": {"length": 5, "offset": 2, **marks}}


def form_text(path, page: int = 0) -> str:
    with pikepdf.open(path) as pdf:
        return pdf.pages[page].Resources.XObject.M.read_bytes().decode()


FLOAT = r"(-?[\d.]+)"


def flat(pairs) -> list[float]:
    return [v for pair in pairs for v in pair]


class TestPrinterMarks:
    def test_registration_targets_at_corners(self, make_pdf, tmp_path):
        """Four targets, centred 14.5 mm diagonally off each trim corner (3 + 7 + 2 + 2.5 mm)."""
        out = tmp_path / "out.pdf"
        impose(load_layout(marked(registration=True)), make_pdf(1, width=A5[0],
                                                                height=A5[1]), out)
        crosses = re.findall(rf"{FLOAT} {FLOAT} m {FLOAT} {FLOAT} l {FLOAT} {FLOAT} m "
                             rf"{FLOAT} {FLOAT} l S", form_text(out))
        centres = sorted((float(c[4]), float(c[1])) for c in crosses)
        expected = sorted((x * MM, y * MM) for x in (16.5, 193.5) for y in (29, 268))
        assert flat(centres) == pytest.approx(flat(expected), abs=0.01)
        for c in crosses:
            assert float(c[2]) - float(c[0]) == pytest.approx(5 * MM, abs=0.01)

    def test_colour_bar_under_the_block(self, make_pdf, tmp_path):
        """Eleven 5 mm patches centred under the block, their top 12 mm below the trim."""
        out = tmp_path / "out.pdf"
        impose(load_layout(marked(colour_bar=True)), make_pdf(1, width=A5[0], height=A5[1]),
               out)
        patches = re.findall(rf"{FLOAT} {FLOAT} {FLOAT} {FLOAT} k {FLOAT} {FLOAT} {FLOAT} "
                             rf"{FLOAT} re f", form_text(out))
        assert [tuple(float(v) for v in p[:4]) for p in patches] == [
            tuple(float(v) for v in tint) for tint in PATCHES]
        rects = [tuple(float(v) for v in p[4:]) for p in patches]
        assert flat(rects) == pytest.approx(flat(
            [((77.5 + 5 * i) * MM, 26.5 * MM, 5 * MM, 5 * MM) for i in range(11)]), abs=0.01)

    def test_slug_names_job_sheet_and_side(self, make_pdf, tmp_path):
        """The slug gives job, tenant, layout, sheet n of m and side, above the block's left edge."""
        out = tmp_path / "out.pdf"
        layout = {**marked(slug=True), "duplex": "work_and_turn"}
        impose(load_layout(layout), make_pdf(4, width=A5[0], height=A5[1]), out,
               slug_fields={"job_id": "J-7", "tenant_id": "acme"})
        with pikepdf.open(out) as pdf:
            contents = [p.Contents.read_bytes().decode() for p in pdf.pages]
        slugs = [re.search(rf"BT /Slug 6 Tf 0 0 0 1 k {FLOAT} {FLOAT} Td \((.*)\) Tj ET",
                           c).groups() for c in contents]
        assert [s[2] for s in slugs] == [
            f"J-7  acme  custom  sheet {n} of 2  {side}"
            for n in (1, 2) for side in ("front", "back")]
        baseline = (253.5 + 12) * MM + (5 * MM - 4.2) / 2
        assert (float(slugs[0][0]), float(slugs[0][1])) == pytest.approx((31 * MM, baseline),
                                                                          abs=0.01)
        assert float(slugs[1][0]) == pytest.approx(31 * MM, abs=0.01)  # mirrored block, same x

    def test_slug_template(self, make_pdf, tmp_path):
        """A slug template fills only the names it uses; a PDF string is escaped."""
        out = tmp_path / "out.pdf"
        impose(load_layout(marked(slug="({tenant_id}) {side}")), make_pdf(1, width=A5[0],
                                                                         height=A5[1]), out)
        with pikepdf.open(out) as pdf:
            assert rb"(\(-\) front) Tj" in pdf.pages[0].Contents.read_bytes()

    def test_unknown_slug_placeholder(self):
        """A slug placeholder the engine does not fill is a layout error naming the known ones."""
        with pytest.raises(LayoutError, match=r"'marks.slug': unknown placeholder \{when\}"):
            load_layout(marked(slug="{when}"))

    def test_outer_band_must_fit(self, make_pdf, tmp_path):
        """Registration targets need a band beyond the crop marks; a tight sheet says so."""
        layout = load_layout("a5-4up-sra3").to_dict()
        layout["marks"]["registration"] = True
        with pytest.raises(LayoutError, match="too wide by"):
            impose(load_layout(layout), make_pdf(4, width=A5[0], height=A5[1]),
                   tmp_path / "o.pdf")


#: Trim size of the artwork each preset is made for, mm.
PRESET_PAGES = {"a4-booklet-sra3": (210, 297), "a4-perfect-sra3": (210, 297),
                "a5-4up-sra3": (148, 210), "a5-booklet-a4": (148, 210),
                "a5-booklet-sra4": (148, 210), "business-cards-press-sra3": (85, 55),
                "business-cards-sra3": (85, 55), "flyers-dl-4up-sra3": (99, 210),
                "letter-2up-tabloid": (215.9, 279.4), "letter-booklet-tabloid": (215.9, 279.4)}


class TestPresets:
    @pytest.mark.parametrize("name", sorted(PRESET_PAGES))
    def test_preset_imposes_its_artwork(self, make_pdf, tmp_path, name):
        """Every preset imposes 8 pages of its own size, delivered with 3 mm bleed, silently."""
        from imposer.engine.presets import preset_names

        assert sorted(PRESET_PAGES) == preset_names()
        w, h = PRESET_PAGES[name]
        layout = load_layout(name)
        if layout.cell is not None:
            assert (layout.cell.width, layout.cell.height) == pytest.approx((w * MM, h * MM))
        summary = impose(layout, make_pdf(8, width=w * MM, height=h * MM, trim_inset=3 * MM),
                         tmp_path / "out.pdf", slug_fields={"job_id": "j1", "tenant_id": "t1"})
        assert summary.pages_placed >= 8 and summary.warnings == ()

    @pytest.mark.parametrize("name", ["a5-booklet-sra4", "a4-booklet-sra3", "a4-perfect-sra3"])
    def test_booklets_have_crop_and_fold_marks(self, make_pdf, tmp_path, name):
        """The press booklet presets draw crop marks and a dashed fold mark on every side."""
        w, h = PRESET_PAGES[name]
        out = tmp_path / "out.pdf"
        impose(name, make_pdf(4, width=w * MM, height=h * MM, trim_inset=3 * MM), out)
        text = form_text(out)
        assert "[3 2] 0 d" in text and text.count(" l S") == 2 * 2 + 2 * 2 + 2  # cuts, fold
