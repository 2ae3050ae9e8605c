"""The imposition engine on real numbered PDFs: page order, geometry, size, rejections.

Page order is read back twice: by pypdf's text extraction of each output page
(the pages print their own number), and by walking each sheet's content
stream to see which page's form XObject is drawn where.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import attrs
import pikepdf
import pypdf
import pytest

from imposer.engine import impose, load_layout
from imposer.engine.order import plan
from imposer.errors import InputPdfError, LayoutError

MM = 72 / 25.4
A4 = (210 * MM, 297 * MM)
A5 = (148 * MM, 210 * MM)
CARD = (85 * MM, 55 * MM)
LETTER = (612.0, 792.0)


@attrs.frozen(kw_only=True)
class Placed:
    """One page drawn on a sheet, as found in the sheet's content stream."""

    label: str
    #: Clip rectangle (x0, y0, x1, y1) in sheet space.
    clip: tuple[float, ...]
    #: The cm matrix (a, b, c, d, e, f).
    matrix: tuple[float, ...]


def placements(path: Path) -> list[list[Placed]]:
    """Return each output page's placements in drawing order."""
    with pikepdf.open(path) as pdf:
        sides = []
        for page in pdf.pages:
            placed, clip, cm = [], (), ()
            for operands, op in pikepdf.parse_content_stream(page):
                if str(op) == "re":
                    x, y, w, h = (float(v) for v in operands)
                    clip = (x, y, x + w, y + h)
                elif str(op) == "cm":
                    cm = tuple(float(v) for v in operands)
                elif str(op) == "Do" and str(operands[0]) != "/M":
                    form = page.Resources.XObject[operands[0]]
                    label = re.search(rb"\((Page \d+)\)", form.read_bytes()).group(1).decode()
                    placed.append(Placed(label=label, clip=clip, matrix=cm))
            sides.append(placed)
        return sides


def texts(path: Path) -> list[list[str]]:
    """Return the text lines pypdf extracts from each output page."""
    return [[line for line in page.extract_text().splitlines() if line.strip()]
            for page in pypdf.PdfReader(path).pages]


def left_to_right(side: list[Placed]) -> list[str]:
    """Return the page labels of a one-row side ordered by position on the sheet."""
    return [p.label for p in sorted(side, key=lambda p: p.clip[0])]


def numbers(*pages: int | None) -> list[str]:
    return [f"Page {n}" for n in pages if n is not None]


def box(pdf_page: pikepdf.Page, name: str) -> list[float]:
    return [float(v) for v in pdf_page.obj[name]]


def run(make_pdf, tmp_path, layout, pages=4, size=A4, **kwargs):
    """Impose a fresh numbered PDF; return the summary and output path."""
    src = make_pdf(pages, width=size[0], height=size[1], **kwargs)
    out = tmp_path / "out.pdf"
    return impose(load_layout(layout), src, out), out


def nup(**fields) -> dict:
    data = {"version": 1, "kind": "nup", "sheet": {"size": "SRA3", "orientation": "landscape"},
            "grid": {"cols": 2, "rows": 1}}
    data.update(fields)
    return data


class TestSaddle:
    def test_sixteen_page_order(self, make_pdf, tmp_path):
        """16 pages fold as 16|1, 2|15, 14|3, 4|13 ... read back as text and by position."""
        summary, out = run(make_pdf, tmp_path, "a5-booklet-a4", 16, A5)
        expected = [(16, 1), (2, 15), (14, 3), (4, 13), (12, 5), (6, 11), (10, 7), (8, 9)]
        assert texts(out) == [numbers(*pair) for pair in expected]
        assert [left_to_right(side) for side in placements(out)] == [
            numbers(*pair) for pair in expected]
        assert (summary.sheets, summary.sides, summary.pages_placed) == (4, 8, 16)

    def test_blank_padding(self, make_pdf, tmp_path):
        """14 pages pad to 16 with blanks at the end: sheet 1 is _|1 then 2|_."""
        summary, out = run(make_pdf, tmp_path, "a5-booklet-a4", 14, A5)
        sides = placements(out)
        assert [p.label for p in sides[0]] == numbers(1)
        assert sides[0][0].clip[0] > 400  # page 1 on the right half
        assert [p.label for p in sides[1]] == numbers(2)
        assert sides[1][0].clip[0] < 400  # page 2 on the left half of the back
        assert summary.blank_cells == 2 and summary.sheets == 4

    def test_sheet_is_the_given_size(self, make_pdf, tmp_path):
        """An A5 booklet's sheet is exactly A4 landscape, the 296 mm spread centred on it."""
        summary, out = run(make_pdf, tmp_path, "a5-booklet-a4", 8, A5)
        with pikepdf.open(out) as pdf:
            assert box(pdf.pages[0], "/MediaBox") == pytest.approx([0, 0, 297 * MM, 210 * MM],
                                                                  abs=0.01)
            assert box(pdf.pages[0], "/TrimBox") == pytest.approx(
                [0.5 * MM, 0, 296.5 * MM, 210 * MM], abs=0.01)
        assert (summary.sheet_width, summary.sheet_height) == pytest.approx((297 * MM, 210 * MM))

    def test_no_bleed_at_the_fold(self, make_pdf, tmp_path):
        """Booklet pages keep bleed on their outer sides only; the clips meet at the fold."""
        _, out = run(make_pdf, tmp_path, "a4-booklet-sra3", 4, A4, trim_inset=3 * MM)
        left, right = sorted(placements(out)[0], key=lambda p: p.clip[0])
        fold = 225 * MM
        assert left.clip == pytest.approx((12 * MM, 8.5 * MM, fold, 311.5 * MM), abs=0.01)
        assert right.clip == pytest.approx((fold, 8.5 * MM, 438 * MM, 311.5 * MM), abs=0.01)


class TestPerfect:
    def test_two_signatures(self, make_pdf, tmp_path):
        """16 pages in 2-sheet signatures: 8|1 2|7 6|3 4|5, then 16|9 10|15 14|11 12|13."""
        layout = {"version": 1, "kind": "perfect", "sheet": {"size": "A4",
                  "orientation": "landscape"}, "signature_sheets": 2}
        summary, out = run(make_pdf, tmp_path, layout, 16, A5)
        expected = [(8, 1), (2, 7), (6, 3), (4, 5), (16, 9), (10, 15), (14, 11), (12, 13)]
        assert texts(out) == [numbers(*pair) for pair in expected]
        assert [left_to_right(s) for s in placements(out)] == [numbers(*p) for p in expected]
        assert summary.sheets == 4

    def test_short_last_signature(self):
        """20 pages in 4-sheet signatures: one of 16 pages, then one of 4."""
        layout = load_layout("a4-perfect-sra3")
        sides = plan(layout, 20, layout.grid)
        assert len(sides) == 10
        assert sides[8:] == [[19, 16], [17, 18]]


class TestNup:
    def test_reading_order(self, make_pdf, tmp_path):
        """2 x 2 n-up puts pages left to right, top to bottom; 10 pages need 3 sheets."""
        summary, out = run(make_pdf, tmp_path, "a5-4up-sra3", 10, A5)
        assert texts(out) == [numbers(1, 2, 3, 4), numbers(5, 6, 7, 8), numbers(9, 10)]
        first = placements(out)[0]
        by_pos = sorted(first, key=lambda p: (-round(p.clip[1]), p.clip[0]))
        assert [p.label for p in by_pos] == numbers(1, 2, 3, 4)
        assert (summary.sheets, summary.pages_placed, summary.blank_cells) == (3, 10, 2)

    def test_work_and_turn_pairs(self, make_pdf, tmp_path):
        """Duplex n-up backs each odd page with the next one, mirrored left-right."""
        _, out = run(make_pdf, tmp_path, nup(duplex="work_and_turn"), 4, A4)
        front, back = placements(out)
        assert left_to_right(front) == numbers(1, 3)
        assert left_to_right(back) == numbers(4, 2)

    def test_grid_auto_fills_sheet(self, make_pdf, tmp_path):
        """An auto grid fits as many A5 cells as SRA3 portrait holds with gutter and bleed."""
        layout = nup(grid="auto", sheet="SRA3", bleed=3, gutter=6)
        summary, out = run(make_pdf, tmp_path, layout, 4, A5)
        assert summary.sheets == 1 and len(placements(out)[0]) == 4


class TestStepRepeat:
    def test_counts(self, make_pdf, tmp_path):
        """Each page fills its own sheet: 2 pages on 21-up give 2 sheets of 21."""
        summary, out = run(make_pdf, tmp_path, {**load_layout("business-cards-sra3").to_dict(),
                                                "duplex": "none"}, 2, CARD)
        assert [len(s) for s in placements(out)] == [21, 21]
        assert texts(out) == [numbers(*[1] * 21), numbers(*[2] * 21)]
        assert (summary.sheets, summary.pages_placed) == (2, 42)

    def test_cards_front_and_back(self, make_pdf, tmp_path):
        """The business-card preset puts page 1 on the front and page 2 on the back."""
        summary, out = run(make_pdf, tmp_path, "business-cards-sra3", 2, CARD)
        assert [{p.label for p in s} for s in placements(out)] == [{"Page 1"}, {"Page 2"}]
        assert summary.sheets == 1 and summary.sides == 2

    def test_page_stored_once(self, tmp_path):
        """A 24-up sheet of a 1-page card with an image stays within 1.5 x the card's size."""
        card = tmp_path / "card.pdf"
        pdf = pikepdf.new()
        image = pdf.make_stream(os.urandom(240 * 160 * 3), Type=pikepdf.Name.XObject,
                                Subtype=pikepdf.Name.Image, Width=240, Height=160,
                                ColorSpace=pikepdf.Name.DeviceRGB, BitsPerComponent=8)
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page, MediaBox=[0, 0, CARD[0], CARD[1]],
            Resources=pikepdf.Dictionary(XObject=pikepdf.Dictionary(Im0=image)),
            Contents=pdf.make_stream(f"q {CARD[0]:.2f} 0 0 {CARD[1]:.2f} 0 0 cm /Im0 Do Q"
                                     .encode()))
        pdf.pages.append(pikepdf.Page(page))
        pdf.save(card)
        layout = {"version": 1, "kind": "step_repeat", "sheet": "SRA2",
                  "grid": {"cols": 4, "rows": 6}, "gutter": 6, "bleed": 3, "marks": True}
        out = tmp_path / "sheet.pdf"
        summary = impose(load_layout(layout), card, out)
        assert summary.pages_placed == 24
        assert out.stat().st_size <= 1.5 * card.stat().st_size
        with pikepdf.open(out) as result:
            images = [o for o in result.objects
                      if isinstance(o, pikepdf.Stream) and o.get("/Subtype") == "/Image"]
            assert len(images) == 1


class TestGeometry:
    def test_a4_on_sra3_with_bleed(self, make_pdf, tmp_path):
        """A4 2-up on SRA3, 3 mm bleed, 6 mm gutter: boxes and placements to 0.01 pt."""
        layout = nup(bleed=3, gutter=6)
        _, out = run(make_pdf, tmp_path, layout, 2, A4, trim_inset=3 * MM)
        with pikepdf.open(out) as pdf:
            sheet = pdf.pages[0]
            assert box(sheet, "/MediaBox") == pytest.approx([0, 0, 450 * MM, 320 * MM], abs=0.01)
            assert box(sheet, "/TrimBox") == pytest.approx(
                [12 * MM, 11.5 * MM, 438 * MM, 308.5 * MM], abs=0.01)
            assert box(sheet, "/BleedBox") == pytest.approx(
                [9 * MM, 8.5 * MM, 441 * MM, 311.5 * MM], abs=0.01)
        first, second = placements(out)[0]
        assert first.clip == pytest.approx((9 * MM, 8.5 * MM, 225 * MM, 311.5 * MM), abs=0.01)
        assert second.clip == pytest.approx((225 * MM, 8.5 * MM, 441 * MM, 311.5 * MM), abs=0.01)
        # Artwork delivered with 3 mm bleed: its TrimBox starts 3 mm into its MediaBox.
        assert first.matrix == pytest.approx((1, 0, 0, 1, 9 * MM, 8.5 * MM), abs=0.01)
        assert second.matrix == pytest.approx((1, 0, 0, 1, 225 * MM, 8.5 * MM), abs=0.01)

    def test_letter_on_12x18_in(self, make_pdf, tmp_path):
        """Letter 2-up on 18 x 12 in with 1/8 in bleed and 1/4 in gutter, in points."""
        layout = nup(units="in", sheet={"width": 18, "height": 12}, bleed=0.125, gutter=0.25)
        summary, out = run(make_pdf, tmp_path, layout, 2, LETTER, trim_inset=9)
        with pikepdf.open(out) as pdf:
            assert box(pdf.pages[0], "/MediaBox") == pytest.approx([0, 0, 1296, 864], abs=0.01)
            assert box(pdf.pages[0], "/TrimBox") == pytest.approx([27, 36, 1269, 828], abs=0.01)
            assert box(pdf.pages[0], "/BleedBox") == pytest.approx([18, 27, 1278, 837], abs=0.01)
        first, second = placements(out)[0]
        assert first.clip == pytest.approx((18, 27, 648, 837), abs=0.01)
        assert second.clip == pytest.approx((648, 27, 1278, 837), abs=0.01)
        assert first.matrix == pytest.approx((1, 0, 0, 1, 18, 27), abs=0.01)
        assert second.matrix == pytest.approx((1, 0, 0, 1, 648, 27), abs=0.01)
        assert (summary.sheet_width, summary.sheet_height) == (1296.0, 864.0)
        assert summary.warnings == ()

    def test_letter_on_tabloid(self, make_pdf, tmp_path):
        """The Letter 2-up Tabloid preset fills 1224 x 792 pt edge to edge."""
        _, out = run(make_pdf, tmp_path, "letter-2up-tabloid", 2, LETTER)
        with pikepdf.open(out) as pdf:
            assert box(pdf.pages[0], "/TrimBox") == pytest.approx([0, 0, 1224, 792], abs=0.01)
        assert [p.matrix[4] for p in placements(out)[0]] == pytest.approx([0, 612], abs=0.01)

    def test_back_mirrors_margins(self, make_pdf, tmp_path):
        """A 10 mm left margin is kept on both sides of a work-and-turn sheet; the back mirrors."""
        layout = nup(duplex="work_and_turn", margins={"left": 10})
        _, out = run(make_pdf, tmp_path, layout, 2, A4)
        with pikepdf.open(out) as pdf:
            front, back = box(pdf.pages[0], "/TrimBox"), box(pdf.pages[1], "/TrimBox")
        assert front[0] == pytest.approx(15 * MM, abs=0.01)  # centred between 10 and 10 mm
        assert back[0] == pytest.approx(450 * MM - front[2], abs=0.01)
        assert back[2] == pytest.approx(450 * MM - front[0], abs=0.01)

    @pytest.mark.parametrize("rotate, linear, width_mm", [
        (90, (0, -1, 1, 0), 210), (180, (-1, 0, 0, -1), 148), (270, (0, 1, -1, 0), 210)])
    def test_rotated_page(self, make_pdf, tmp_path, rotate, linear, width_mm):
        """A page with /Rotate is placed as displayed, its trim exactly on the cell."""
        src = make_pdf(1, width=A5[0], height=A5[1])
        with pikepdf.open(src, allow_overwriting_input=True) as pdf:
            pdf.pages[0].Rotate = rotate
            pdf.save(src)
        layout = nup(sheet={"size": "A4", "orientation": "portrait"},
                     grid={"cols": 1, "rows": 1})
        impose(load_layout(layout), src, tmp_path / "out.pdf")
        placed = placements(tmp_path / "out.pdf")[0][0]
        a, b, c, d, e, f = placed.matrix
        corners = [(a * x + c * y + e, b * x + d * y + f) for x, y in
                   [(0, 0), (A5[0], A5[1])]]
        xs, ys = sorted(p[0] for p in corners), sorted(p[1] for p in corners)
        assert (xs[0], ys[0], xs[1], ys[1]) == pytest.approx(placed.clip, abs=0.01)
        assert xs[1] - xs[0] == pytest.approx(width_mm * MM, abs=0.01)
        assert (a, b, c, d) == linear

    def test_mixed_sizes_centred(self, make_pdf, tmp_path):
        """With mixed_sizes center, a smaller page is centred in page 1's cell."""
        big, small = make_pdf(1, width=A4[0], height=A4[1]), make_pdf(1, width=A5[0],
                                                                    height=A5[1])
        with pikepdf.open(big, allow_overwriting_input=True) as pdf, pikepdf.open(small) as s:
            pdf.pages.append(s.pages[0])
            pdf.save(big)
        impose(load_layout(nup(mixed_sizes="center")), big, tmp_path / "out.pdf")
        first, second = placements(tmp_path / "out.pdf")[0]
        assert second.matrix[4] - first.matrix[4] == pytest.approx(
            210 * MM + (210 - 148) / 2 * MM, abs=0.01)
        assert second.clip[2] - second.clip[0] == pytest.approx(148 * MM, abs=0.01)

    def test_crop_marks_outside_bleed(self, make_pdf, tmp_path):
        """Every crop mark lies on a trim line and entirely outside the bleed box."""
        _, out = run(make_pdf, tmp_path, "a5-4up-sra3", 4, A5)
        with pikepdf.open(out) as pdf:
            page = pdf.pages[0]
            bleed = box(page, "/BleedBox")
            trim = box(page, "/TrimBox")
            marks = page.Resources.XObject.M.read_bytes().decode()
        lines = [tuple(map(float, m)) for m in re.findall(
            r"([\d.]+) ([\d.]+) m ([\d.]+) ([\d.]+) l", marks)]
        assert len(lines) == 2 * (4 + 4)  # 4 cut lines across, 4 down, both ends
        for x0, y0, x1, y1 in lines:
            outside = (min(y0, y1) >= bleed[3] - 1e-6 or max(y0, y1) <= bleed[1] + 1e-6
                       or min(x0, x1) >= bleed[2] - 1e-6 or max(x0, x1) <= bleed[0] + 1e-6)
            assert outside
        cuts_x = sorted({x0 for x0, _, x1, _ in lines if x0 == x1})
        assert cuts_x == pytest.approx([trim[0], trim[0] + 148 * MM, trim[2] - 148 * MM,
                                        trim[2]], abs=0.01)


class TestRejections:
    def test_garbage(self, tmp_path):
        """A file that is not a PDF is a corrupt-input error."""
        bad = tmp_path / "bad.pdf"
        bad.write_bytes(b"this is not a pdf at all")
        with pytest.raises(InputPdfError, match="input PDF is corrupt"):
            impose(load_layout("a5-booklet-a4"), bad, tmp_path / "out.pdf")
        assert not (tmp_path / "out.pdf").exists()

    def test_encrypted(self, make_pdf, tmp_path):
        """A PDF that needs a password is refused as encrypted."""
        src, locked = make_pdf(2), tmp_path / "locked.pdf"
        with pikepdf.open(src) as pdf:
            pdf.save(locked, encryption=pikepdf.Encryption(user="u", owner="o"))
        with pytest.raises(InputPdfError, match="encrypted and needs a password"):
            impose(load_layout("a5-booklet-a4"), locked, tmp_path / "out.pdf")

    def test_printing_forbidden(self, make_pdf, tmp_path):
        """A PDF whose permissions forbid printing is refused."""
        src, locked = make_pdf(2), tmp_path / "locked.pdf"
        with pikepdf.open(src) as pdf:
            pdf.save(locked, encryption=pikepdf.Encryption(
                user="", owner="o", allow=pikepdf.Permissions(print_highres=False)))
        with pytest.raises(InputPdfError, match="does not permit printing"):
            impose(load_layout("a5-booklet-a4"), locked, tmp_path / "out.pdf")

    def test_empty(self, tmp_path):
        """A PDF without pages is refused."""
        empty = tmp_path / "empty.pdf"
        pikepdf.new().save(empty)
        with pytest.raises(InputPdfError, match="has no pages"):
            impose(load_layout("a5-booklet-a4"), empty, tmp_path / "out.pdf")

    def test_missing(self, tmp_path):
        """An input path to nothing is an input error, not FileNotFoundError."""
        with pytest.raises(InputPdfError, match="not found"):
            impose(load_layout("a5-booklet-a4"), tmp_path / "nope.pdf", tmp_path / "out.pdf")

    def test_mixed_sizes_refused(self, make_pdf, tmp_path):
        """Pages of different sizes are refused by default, naming the page."""
        src, other = make_pdf(2, width=A4[0], height=A4[1]), make_pdf(1, width=A5[0],
                                                                     height=A5[1])
        with pikepdf.open(src, allow_overwriting_input=True) as pdf, pikepdf.open(other) as o:
            pdf.pages.append(o.pages[0])
            pdf.save(src)
        with pytest.raises(InputPdfError, match="input page 3 is 148 mm .* mixed page sizes"):
            impose(load_layout(nup()), src, tmp_path / "out.pdf")

    @pytest.mark.parametrize("rotate, message", [(45, "has /Rotate 45; want a multiple of 90")])
    def test_odd_rotation(self, make_pdf, tmp_path, rotate, message):
        """A /Rotate that is not a multiple of 90 is refused."""
        src = make_pdf(1)
        with pikepdf.open(src, allow_overwriting_input=True) as pdf:
            pdf.pages[0].Rotate = rotate
            pdf.save(src)
        with pytest.raises(InputPdfError, match=message):
            impose(load_layout(nup()), src, tmp_path / "out.pdf")

    @pytest.mark.parametrize("trim, message", [
        (["a", 0, 10, 10], "TrimBox is not an array of four numbers"),
        ([0, 0, 0, 500], "TrimBox is empty"),
        ([5000, 5000, 6000, 6000], "TrimBox lies outside its MediaBox"),
    ])
    def test_bad_trim_box(self, make_pdf, tmp_path, trim, message):
        """A malformed TrimBox is refused with the page and the box named."""
        src = make_pdf(1)
        with pikepdf.open(src, allow_overwriting_input=True) as pdf:
            pdf.pages[0].TrimBox = pikepdf.Array(trim)
            pdf.save(src)
        with pytest.raises(InputPdfError, match=f"input page 1 {message}"):
            impose(load_layout(nup()), src, tmp_path / "out.pdf")

    def test_damaged_copies(self, make_pdf, tmp_path):
        """Damaged copies of a real PDF either impose or raise InputPdfError, nothing else."""
        data = make_pdf(6, width=A5[0], height=A5[1]).read_bytes()
        layout, bad, outcomes = load_layout("a5-booklet-a4"), tmp_path / "bad.pdf", set()
        for seed in range(90):
            rng, damaged = random.Random(seed), bytearray(data)
            if seed % 3 == 0:
                for _ in range(rng.randint(1, 20)):
                    damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            elif seed % 3 == 1:
                del damaged[rng.randrange(len(damaged)):]
            else:
                start = rng.randrange(len(damaged))
                del damaged[start:start + rng.randint(1, 200)]
            bad.write_bytes(bytes(damaged))
            try:
                impose(layout, bad, tmp_path / "out.pdf")
                outcomes.add("imposed")
            except InputPdfError:
                outcomes.add("refused")
        assert "refused" in outcomes

    def test_grid_too_big(self, make_pdf, tmp_path):
        """A grid that does not fit the sheet is a LayoutError giving both sizes."""
        with pytest.raises(LayoutError, match=r"'grid': 3 x 1 cells .* but the sheet SRA3"):
            run(make_pdf, tmp_path, nup(grid={"cols": 3, "rows": 1}), 3, A4)

    def test_auto_grid_too_small(self, make_pdf, tmp_path):
        """An auto grid on a sheet smaller than one page is a LayoutError."""
        layout = nup(grid="auto", sheet="A5")
        with pytest.raises(LayoutError, match="'grid': auto cells"):
            run(make_pdf, tmp_path, layout, 1, A4)
