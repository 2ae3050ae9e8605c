"""Hostile layouts and PDFs: each fails once, as the right permanent error, with a clear reason.

Every PDF here is made in the test: decompression bombs, huge or missing
MediaBoxes, looping page trees, odd rotations, broken cross-reference tables.
The last class fuzzes: random JSON layouts, random bytes and mutated PDFs may
raise only LayoutError, InputPdfError or TooLarge.
"""

from __future__ import annotations

import io
import json
import random
import zlib
from pathlib import Path

import pikepdf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pikepdf import Array, Dictionary, Name

from imposer.engine import impose, load_layout
from imposer.engine.budget import Budget
from imposer.errors import InputPdfError, LayoutError, TooLarge

MM = 72 / 25.4
ONE_UP = {"version": 1, "kind": "nup", "sheet": "A3", "grid": {"cols": 1, "rows": 1}}


def spec(**fields) -> dict:
    return {**ONE_UP, **fields}


def nested(depth: int) -> list:
    """Return a list nested *depth* levels deep, built without recursion."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def bomb(decoded: int, layers: int = 1) -> bytes:
    """Return Flate data that inflates to *decoded* zero bytes (blocks repeated after a full flush)."""
    zeros = b"\0" * (1 << 24)
    comp = zlib.compressobj(9)
    head = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    data = head + block * (max(1, decoded >> 24) - 1) + comp.flush()
    for _ in range(layers - 1):
        data = zlib.compress(data, 9)
    return data


def pdf_with(tmp_path: Path, edit=None, pages: int = 1, name: str = "in.pdf") -> Path:
    """Write a real PDF of *pages* A4 pages, after *edit(pdf)* has changed it."""
    pdf = pikepdf.new()
    for _ in range(pages):
        pdf.add_blank_page(page_size=(595, 842))
        pdf.pages[-1].Contents = pdf.make_stream(b"0 0 1 rg 10 10 100 100 re f")
    if edit:
        edit(pdf)
    path = tmp_path / name
    pdf.save(path, stream_decode_level=pikepdf.StreamDecodeLevel.none)  # never inflate a bomb
    return path


def bomb_content(filters: int):
    def edit(pdf):
        stream = pikepdf.Stream(pdf, bomb(2 << 30, filters))
        stream.Filter = Array([Name.FlateDecode] * filters)
        pdf.pages[0].Contents = stream
    return edit


def bomb_in_array(pdf):
    stream = pikepdf.Stream(pdf, bomb(1 << 30))
    stream.Filter = Name.FlateDecode
    pdf.pages[0].Contents = Array([pdf.make_stream(b"q"), pdf.make_indirect(stream),
                                   pdf.make_stream(b"Q")])


def bomb_font(pdf):
    font_file = pikepdf.Stream(pdf, bomb(1 << 30))
    font_file.Filter = Name.FlateDecode
    pdf.pages[0].Resources = Dictionary(Font=Dictionary(F1=Dictionary(
        Type=Name.Font, Subtype=Name.TrueType, BaseFont=Name.X,
        FontDescriptor=Dictionary(FontFile2=pdf.make_indirect(font_file)))))


def giant_image(pdf):
    image = pikepdf.Stream(pdf, zlib.compress(b"\0" * 3000))
    image.Filter, image.Type, image.Subtype = Name.FlateDecode, Name.XObject, Name.Image
    image.Width = image.Height = 100_000
    image.ColorSpace, image.BitsPerComponent = Name.DeviceRGB, 8
    pdf.pages[0].Resources = Dictionary(XObject=Dictionary(Im0=pdf.make_indirect(image)))


def lzw_stream(pdf):
    stream = pikepdf.Stream(pdf, bytes(random.Random(1).randrange(256) for _ in range(4000)))
    stream.Filter = Name.LZWDecode
    pdf.pages[0].Contents = stream


def set_page(**keys):
    def edit(pdf):
        for key, value in keys.items():
            pdf.pages[0].obj[f"/{key}"] = value
    return edit


def loop_pages(pdf):
    pdf.Root.Pages.Kids.append(pdf.Root.Pages)
    pdf.Root.Pages.Count = 3


LAYOUT_CASES = [
    ("infinity-text", '{"version": 1, "kind": "nup", "sheet": {"width": Infinity, "height": 9}}',
     "is not valid JSON: Infinity is not a number JSON allows"),
    ("nan-text", '{"version": 1, "kind": "nup", "sheet": "A4", "bleed": NaN}',
     "is not valid JSON: NaN is not a number JSON allows"),
    ("deep-text", '{"version": 1, "x": ' + "[" * 10_000 + "]" * 10_000 + "}",
     "nests 10001 levels deep; the limit is 32"),
    ("deep-33", '{"a": ' + "[" * 32 + "]" * 32 + "}", "nests 33 levels deep; the limit is 32"),
    ("huge-text", '{"version": 1, "description": "' + "x" * (1 << 21) + '"}',
     "characters; the limit is 1048576"),
    ("1e400-text", '{"version": 1, "kind": "nup", "sheet": "A4", "bleed": 1e400}',
     "layout field 'bleed': want a finite length, got inf"),
]

DATA_CASES = [
    ("inf", spec(sheet={"width": float("inf"), "height": 100}),
     "layout field 'sheet.width': want a finite length, got inf"),
    ("nan", spec(bleed=float("nan")), "layout field 'bleed': want a finite length, got nan"),
    ("1e308", spec(sheet={"width": 1e308, "height": 100}),
     "layout field 'sheet.width': want a length of at most 200 in (14400 pt), got 1e+308"),
    ("-1e308", spec(gutter=-1e308), "layout field 'gutter.x': want a length of at most 200 in"),
    ("10**400", spec(bleed=10 ** 400),
     "layout field 'bleed': want a length of at most 200 in (14400 pt), got a number of "
     "about 400 digits"),
    ("string-huge", spec(sheet={"width": "9" * 40 + "mm", "height": 100}),
     "layout field 'sheet.width': want a length of at most 200 in"),
    ("string-exponent", spec(bleed="1e308mm"),
     "layout field 'bleed': want a number or a string like '3mm'"),
    ("deep-dict", spec(margins=nested(10_000)), "layout nests more than 32 levels deep"),
    ("deep-list-ok", spec(margins=nested(20)),
     "layout field 'margins': want a length or an object of sides, got a list of 1 items"),
    ("grid-1000", spec(grid={"cols": 1000, "rows": 1000}),
     "layout field 'grid.cols': want a whole number from 1 to 100, got 1000"),
    ("signatures-huge", {**spec(kind="perfect", grid=None), "signature_sheets": 10 ** 40},
     "layout field 'signature_sheets': want a whole number from 1 to 64, got a number of"),
    ("key-not-string", {**ONE_UP, 1: 2}, "layout field '': key 1 is not a string"),
    ("bool-length", spec(bleed=True), "layout field 'bleed': want a length, got True"),
    ("sheet-201in", spec(sheet={"width": "201in", "height": "10in"}),
     "layout field 'sheet.width': want a length of at most 200 in"),
    ("slug-long", spec(marks={"slug": "x" * 5000}), "layout field 'marks.slug': want true"),
    ("creep-thick", spec(kind="saddle", grid=None, creep="5mm"),
     "layout field 'creep': is the paper thickness; want at most 1 mm"),
]


class TestHostileLayouts:
    @pytest.mark.parametrize("name, text, message", LAYOUT_CASES,
                             ids=[c[0] for c in LAYOUT_CASES])
    def test_text(self, tmp_path, name, text, message):
        """Hostile layout JSON text fails as bad_layout with a short, clear reason."""
        path = tmp_path / "layout.json"
        path.write_text(text)
        with pytest.raises(LayoutError) as info:
            load_layout(path)
        assert message in str(info.value) and info.value.kind == "bad_layout"
        assert len(str(info.value)) < 300

    @pytest.mark.parametrize("name, data, message", DATA_CASES, ids=[c[0] for c in DATA_CASES])
    def test_data(self, name, data, message):
        """Hostile inline layout data fails as bad_layout, never Overflow/Value/RecursionError."""
        with pytest.raises(LayoutError) as info:
            load_layout(data)
        assert str(info.value).startswith(message), str(info.value)
        assert len(str(info.value)) < 300

    def test_long_unknown_key(self):
        """A 10,000-character unknown field name is named briefly."""
        with pytest.raises(LayoutError, match=r"^layout field 'xxx+\.\.\.': unknown field$"):
            load_layout({**ONE_UP, "x" * 10_000: 1})

    def test_dev_zero_as_a_layout_file(self):
        """/dev/zero as a layout file is refused before any read: it is no regular file."""
        with pytest.raises(LayoutError, match="is not a regular file"):
            load_layout("/dev/zero")

    def test_a_fifo_as_a_layout_file(self, tmp_path):
        """A FIFO as a layout file is refused at once, never opened (its open would wait)."""
        import os

        os.mkfifo(tmp_path / "layout.json")
        with pytest.raises(LayoutError, match="is not a regular file"):
            load_layout(str(tmp_path / "layout.json"))

    def test_a_huge_layout_file_is_read_only_to_the_limit(self, tmp_path):
        """A regular layout file over the limit is read only up to it."""
        big = tmp_path / "big.json"
        big.write_bytes(b" " * (2 * 1048576))
        with pytest.raises(LayoutError, match="characters; the limit is 1048576"):
            load_layout(str(big))


class TestHugeJobs:
    def test_huge_grid_placements(self, tmp_path):
        """A 100 x 100 step-and-repeat of 30 pages (300,000 placements) fails as too_large."""
        layout = {"version": 1, "kind": "step_repeat", "units": "pt",
                  "sheet": {"width": 5600, "height": 5600}, "grid": {"cols": 100, "rows": 100}}
        src = pdf_with(tmp_path, lambda pdf: [setattr(p, "MediaBox", [0, 0, 50, 50])
                                              for p in pdf.pages], pages=30)
        with pytest.raises(TooLarge, match="places pages 300,000 times; the budget allows "
                                           "200,000") as info:
            impose(layout, src, tmp_path / "out.pdf")
        assert info.value.kind == "too_large"

    def test_huge_sheet(self, tmp_path):
        """A 200 x 200 in sheet is over the 4 m2 sheet budget."""
        layout = spec(units="in", sheet={"width": 200, "height": 200})
        with pytest.raises(TooLarge, match=r"the sheet is 25.81 m2; the budget allows 4.00 m2"):
            impose(layout, pdf_with(tmp_path), tmp_path / "out.pdf")

    @pytest.mark.parametrize("budget, message", [
        (Budget(max_pages=3), "input PDF has 4 pages; the budget allows 3"),
        (Budget(max_objects=5), "objects; the budget allows 5"),
        (Budget(max_input_bytes=100), "bytes; the budget allows 100"),
        (Budget(max_sides=3), "needs 4 sheet sides; the budget allows 3"),
    ], ids=["pages", "objects", "bytes", "sides"])
    def test_budget_limits(self, tmp_path, budget, message):
        """Each limit of a smaller Budget refuses a 4-page job before imposing it."""
        with pytest.raises(TooLarge, match=message):
            impose(ONE_UP, pdf_with(tmp_path, pages=4), tmp_path / "out.pdf", budget=budget)
        assert not (tmp_path / "out.pdf").exists()


PDF_CASES = [
    ("bomb-content", bomb_content(1), TooLarge, "decodes to more than the budget's"),
    ("bomb-two-layers", bomb_content(2), TooLarge, "decodes to more than the budget's"),
    ("bomb-in-array", bomb_in_array, TooLarge, "decodes to more than the budget's"),
    ("bomb-font", bomb_font, TooLarge, "decodes to more than the budget's"),
    ("giant-image", giant_image, TooLarge, "is 100,000 x 100,000 pixels"),
    ("huge-mediabox", set_page(MediaBox=Array([0, 0, 100_000, 100_000])), InputPdfError,
     "input page 1 MediaBox is 100000 x 100000 pt; PDF allows at most 14400 pt"),
    ("absurd-mediabox", set_page(MediaBox=Array([0, 0, 1e12, 10])), InputPdfError,
     "input page 1 MediaBox has a coordinate beyond 1,000,000 pt"),
    ("mediabox-strings", set_page(MediaBox=Array(["a", 0, 10, 10])), InputPdfError,
     "input page 1 has no valid MediaBox"),
    ("no-mediabox", lambda pdf: pdf.pages[0].obj.__delitem__("/MediaBox"), InputPdfError,
     "input page 1 has no valid MediaBox, so its size is unknown"),
    ("rotate-45", set_page(Rotate=45), InputPdfError, "input page 1 has /Rotate 45"),
    ("rotate-name", set_page(Rotate=Name.Ninety), InputPdfError, "input page 1 is malformed"),
    ("userunit", set_page(UserUnit=2), InputPdfError, "input page 1 uses /UserUnit 2.0"),
    ("page-tree-loop", loop_pages, InputPdfError, "input PDF is corrupt"),
    ("zero-pages", lambda pdf: pdf.pages.__delitem__(0), InputPdfError,
     "input PDF has no pages"),
]


class TestHostilePdfs:
    @pytest.mark.parametrize("name, edit, error, message", PDF_CASES,
                             ids=[c[0] for c in PDF_CASES])
    def test_made_pdf(self, tmp_path, name, edit, error, message):
        """Each hostile PDF fails as its exact error class, with the reason in words."""
        src = pdf_with(tmp_path, edit)
        with pytest.raises(error) as info:
            impose(ONE_UP, src, tmp_path / "out.pdf")
        assert type(info.value) is error and message in str(info.value), str(info.value)
        assert not (tmp_path / "out.pdf").exists()

    def test_lzw_worst_case(self, tmp_path):
        """A non-Flate stream that could expand past the stream limit is refused unread."""
        with pytest.raises(TooLarge, match=r"\(/LZWDecode, 4,000 bytes\) could decode to more"):
            impose(ONE_UP, pdf_with(tmp_path, lzw_stream), tmp_path / "out.pdf",
                   budget=Budget(max_stream_bytes=1 << 20))

    def test_deep_page_tree(self, tmp_path):
        """A page tree nested 5,000 levels deep is refused as corrupt, not a crash."""
        def edit(pdf):
            leaf, top = pdf.pages[0].obj, pdf.make_indirect(Dictionary(Type=Name.Pages,
                                                                       Count=1, Kids=[]))
            node = top
            for _ in range(5000):
                child = pdf.make_indirect(Dictionary(Type=Name.Pages, Count=1, Kids=[],
                                                     Parent=node))
                node.Kids.append(child)
                node = child
            node.Kids.append(leaf)
            leaf.Parent = node
            pdf.Root.Pages = top
        with pytest.raises(InputPdfError, match="too deeply nested"):
            impose(ONE_UP, pdf_with(tmp_path, edit), tmp_path / "out.pdf")

    def test_broken_xref_is_repaired(self, tmp_path):
        """A wrong cross-reference table is rebuilt by qpdf and the job succeeds."""
        src = pdf_with(tmp_path, pages=2)
        data = src.read_bytes()
        start = data.rindex(b"startxref")
        src.write_bytes(data[:start] + b"startxref\n999999\n%%EOF\n")
        assert impose(ONE_UP, src, tmp_path / "out.pdf").pages_placed == 2

    def test_encrypted(self, tmp_path):
        """A PDF that needs a password is bad_pdf."""
        src = pdf_with(tmp_path)
        locked = tmp_path / "locked.pdf"
        with pikepdf.open(src) as pdf:
            pdf.save(locked, encryption=pikepdf.Encryption(user="u", owner="o"))
        with pytest.raises(InputPdfError, match="encrypted and needs a password"):
            impose(ONE_UP, locked, tmp_path / "out.pdf")

    @pytest.mark.parametrize("data", [b"", b"%PDF-1.7\n", b"\x00" * 4096],
                             ids=["empty", "header-only", "zeros"])
    def test_not_a_pdf(self, tmp_path, data):
        """Files with no PDF in them are bad_pdf."""
        src = tmp_path / "in.pdf"
        src.write_bytes(data)
        with pytest.raises(InputPdfError, match="input PDF is corrupt"):
            impose(ONE_UP, src, tmp_path / "out.pdf")


ALLOWED = (LayoutError, InputPdfError, TooLarge)
json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=4),
    max_leaves=12)
FIELDS = ["version", "kind", "sheet", "grid", "units", "margins", "gutter", "bleed", "marks",
          "duplex", "fit", "cell", "creep", "rotate_to_fit", "mixed_sizes", "page_box",
          "signature_sheets", "annotations", "pdftoolbox", "name"]
layouts = st.fixed_dictionaries(
    {"version": st.just(1), "kind": st.sampled_from(["nup", "saddle", "step_repeat",
                                                     "perfect"]),
     "sheet": st.sampled_from(["A4", "SRA3", {"width": 300, "height": 200}])},
    optional={key: json_values for key in FIELDS[3:]})


class TestFuzz:
    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=layouts)
    def test_random_layouts(self, data):
        """Random layout data loads or raises LayoutError, never anything else."""
        try:
            load_layout(data)
        except LayoutError:
            pass

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.binary(max_size=2000))
    def test_random_bytes(self, tmp_path_factory, data):
        """Random bytes as an input PDF raise only the engine's errors."""
        path = tmp_path_factory.mktemp("fuzz") / "in.pdf"
        path.write_bytes(b"%PDF-1.4\n" + data)
        with pytest.raises(ALLOWED):
            impose(ONE_UP, path, path.with_name("out.pdf"))

    def test_mutated_pdfs(self, tmp_path):
        """Byte-mutated copies of a rich PDF (layers, forms, images) raise only our errors."""
        base = io.BytesIO()
        pdf = pikepdf.open(pdf_with(tmp_path, giant_image, pages=3, name="rich.pdf"))
        pdf.pages[0].Resources.XObject.Im0.Width = 30
        pdf.pages[0].Resources.XObject.Im0.Height = 10
        pdf.save(base, compress_streams=False)
        data = base.getvalue()
        layouts_ = [ONE_UP, "a5-booklet-a4", spec(fit="fit", cell={"width": 100, "height": 50})]
        for seed in range(120):
            rng, damaged = random.Random(seed), bytearray(data)
            for _ in range(rng.randint(1, 12)):
                damaged[rng.randrange(len(damaged))] = rng.choice(b"0123456789[]<>/() \n")
            src = tmp_path / "bad.pdf"
            src.write_bytes(bytes(damaged))
            try:
                impose(layouts_[seed % 3], src, tmp_path / "out.pdf")
            except ALLOWED:
                pass

    def test_layout_json_fuzz(self, tmp_path):
        """Random JSON text as a layout file raises only LayoutError."""
        rng = random.Random(7)
        alphabet = '{}[]:,"0123456789.eE-+ truefalsnul\\'
        path = tmp_path / "l.json"
        for _ in range(300):
            path.write_text("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))))
            try:
                load_layout(path)
            except LayoutError:
                pass
        path.write_text(json.dumps(spec(bleed=3)))
        assert load_layout(path).bleed == pytest.approx(3 * MM)
