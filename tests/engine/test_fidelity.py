"""Print-shop fidelity, read back from the plate: layers, colour, metadata, annotations, bleed.

Where geometry alone cannot tell (a hidden layer absent, an annotation's
appearance present), the plate is rendered with poppler's ``pdftoppm`` and its
pixels are read.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pikepdf
import pytest
from pikepdf import Array, Dictionary, Name, String

from imposer.engine import impose, load_layout
from imposer.errors import InputPdfError, LayoutError
from tests.engine.test_engine import A4, A5, MM, placements
from tests.fixtures.documents import pdftex_form, review_page

DPI = 36


def render(path: Path, page: int = 1) -> tuple[int, int, bytes]:
    """Render one page at DPI to raw RGB; return width, height and the pixel bytes."""
    ppm = subprocess.run(["pdftoppm", "-r", str(DPI), "-f", str(page), "-l", str(page),
                          str(path)], capture_output=True, check=True).stdout
    magic, width, height, _, data = ppm.split(maxsplit=4)
    assert magic == b"P6"
    return int(width), int(height), data


def colour_at(image: tuple[int, int, bytes], x: float, y: float) -> tuple[int, int, int]:
    """Return the RGB of the pixel at (x, y) PDF points (origin bottom left)."""
    width, height, data = image
    col, row = int(x * DPI / 72), height - 1 - int(y * DPI / 72)
    i = 3 * (row * width + col)
    return tuple(data[i:i + 3])


def text_of(path: Path) -> str:
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def one_up(**fields) -> dict:
    """An A5 page alone on an A4 portrait sheet, centred: page origin at (73.7, 123.3) pt."""
    data = {"version": 1, "kind": "nup", "sheet": {"size": "A4", "orientation": "portrait"},
            "grid": {"cols": 1, "rows": 1}}
    data.update(fields)
    return data


ORIGIN = ((A4[0] - A5[0]) / 2, (A4[1] - A5[1]) / 2)


def page_pdf(path: Path, content: bytes, **page_keys) -> pikepdf.Pdf:
    """Return a new one-page A5 PDF (not yet saved) drawing *content*."""
    pdf = pikepdf.new()
    page = Dictionary(Type=Name.Page, MediaBox=[0, 0, A5[0], A5[1]],
                      Resources=Dictionary(), Contents=pdf.make_stream(content), **page_keys)
    pdf.pages.append(pikepdf.Page(page))
    return pdf


def layered(path: Path) -> Path:
    """Write a page with a red square on layer Visible and a blue one on layer Hidden (off)."""
    content = (b"/OC /oc1 BDC 1 0 0 rg 20 20 100 100 re f EMC "
               b"/OC /oc2 BDC 0 0 1 rg 200 20 100 100 re f EMC")
    pdf = page_pdf(path, content)
    vis = pdf.make_indirect(Dictionary(Type=Name.OCG, Name=String("Visible")))
    hid = pdf.make_indirect(Dictionary(Type=Name.OCG, Name=String("Hidden")))
    pdf.Root.OCProperties = Dictionary(OCGs=[vis, hid], D=Dictionary(Order=[vis, hid],
                                                                     OFF=[hid]))
    pdf.pages[0].obj.Resources.Properties = Dictionary(oc1=vis, oc2=hid)
    pdf.save(path)
    return path


def annotated(path: Path) -> Path:
    """Write a page with a green stamp annotation and a filled text field with no appearance."""
    pdf = page_pdf(path, b"")
    stamp_ap = pdf.make_stream(b"0 1 0 rg 0 0 50 50 re f", Type=Name.XObject,
                               Subtype=Name.Form, BBox=[0, 0, 50, 50])
    stamp = pdf.make_indirect(Dictionary(Type=Name.Annot, Subtype=Name.Stamp,
                                         Rect=[20, 300, 70, 350], F=4,
                                         AP=Dictionary(N=stamp_ap)))
    font = pdf.make_indirect(Dictionary(Type=Name.Font, Subtype=Name.Type1,
                                        BaseFont=Name.Helvetica))
    field = pdf.make_indirect(Dictionary(
        Type=Name.Annot, Subtype=Name.Widget, FT=Name.Tx, T=String("name"),
        V=String("HELLO 42"), Rect=[20, 400, 300, 430], F=4, DA=String("/Helv 12 Tf 0 g"),
        P=pdf.pages[0].obj))
    pdf.pages[0].obj.Annots = Array([stamp, field])
    pdf.Root.AcroForm = Dictionary(Fields=[field], NeedAppearances=True,
                                   DR=Dictionary(Font=Dictionary(Helv=font)))
    pdf.save(path)
    return path


GREEN, RED, BLUE, WHITE = (0, 255, 0), (255, 0, 0), (0, 0, 255), (255, 255, 255)


def reviewed(path: Path) -> Path:
    """Write a page of text marked up as a review tool does: geometry and colour, no /AP."""
    text = b"BT /F1 14 Tf 40 500 Td (Highlighted words on a page) Tj ET 0 g 150 495 40 20 re f"
    pdf = page_pdf(path, text)
    pdf.pages[0].obj.Resources.Font = Dictionary(F1=pdf.make_indirect(Dictionary(
        Type=Name.Font, Subtype=Name.Type1, BaseFont=Name.Helvetica)))
    highlight = Dictionary(Type=Name.Annot, Subtype=Name.Highlight, F=4, C=[1, 1, 0],
                           Rect=[38, 495, 260, 515],
                           QuadPoints=[38, 515, 260, 515, 38, 495, 260, 495])
    ink = Dictionary(Type=Name.Annot, Subtype=Name.Ink, F=4, C=[1, 0, 0],
                     BS=Dictionary(W=3), Rect=[40, 300, 300, 400],
                     InkList=[[50, 310, 120, 390, 200, 320, 290, 380]])
    square = Dictionary(Type=Name.Annot, Subtype=Name.Square, F=4, C=[0, 0, 1],
                        BS=Dictionary(W=4), Rect=[60, 100, 200, 200])
    note = Dictionary(Type=Name.Annot, Subtype=Name.Text, F=4, Rect=[300, 550, 320, 570],
                      Contents=String("check this"), NM=String("note-1"))
    pdf.pages[0].obj.Annots = Array([pdf.make_indirect(a) for a in (highlight, ink, square,
                                                                     note)])
    pdf.save(path)
    return path


def form(path: Path) -> Path:
    """Write a form whose filler set /NeedAppearances: an empty field and a ticked check box."""
    pdf = page_pdf(path, b"")
    page = pdf.pages[0].obj
    empty = pdf.make_indirect(Dictionary(
        Type=Name.Annot, Subtype=Name.Widget, FT=Name.Tx, T=String("name"), F=4,
        Rect=[40, 400, 300, 440], DA=String("/Helv 12 Tf 0 g"), BS=Dictionary(W=3),
        MK=Dictionary(BC=[0, 0, 1]), P=page))
    box = pdf.make_indirect(Dictionary(
        Type=Name.Annot, Subtype=Name.Widget, FT=Name.Btn, T=String("agree"), F=4,
        V=Name.Yes, AS=Name.Yes, Rect=[40, 300, 80, 340], BS=Dictionary(W=3),
        MK=Dictionary(BC=[1, 0, 0], CA=String("4")), P=page))
    page.Annots = Array([empty, box])
    font = pdf.make_indirect(Dictionary(Type=Name.Font, Subtype=Name.Type1,
                                        BaseFont=Name.Helvetica))
    pdf.Root.AcroForm = Dictionary(Fields=[empty, box], NeedAppearances=True,
                                   DR=Dictionary(Font=Dictionary(Helv=font)))
    pdf.save(path)
    return path


def count(image: tuple[int, int, bytes], colour: tuple[int, int, int]) -> int:
    """Count the pixels near *colour* (each channel within 60)."""
    data = image[2]
    return sum(1 for i in range(0, len(data), 3)
               if all(abs(data[i + c] - colour[c]) < 60 for c in range(3)))


YELLOW, BLACK = (255, 255, 0), (0, 0, 0)
#: 12 pt text rendered at DPI: anti-aliased to dark grey (dark yellow under a marker).
TEXT = (50, 50, 50)


def same_size(path: Path) -> dict:
    """A layout placing each page of *path* alone on a sheet of its own size."""
    with pikepdf.open(path) as pdf:
        x0, y0, x1, y1 = (float(v) for v in pdf.pages[0].mediabox)
    return {"version": 1, "kind": "nup", "units": "pt", "grid": {"cols": 1, "rows": 1},
            "sheet": {"width": x1 - x0, "height": y1 - y0}}


class TestLayers:
    def test_hidden_layer_stays_hidden(self, tmp_path, poppler):
        """A layer off by default in the source does not print on the plate; one on does."""
        out = tmp_path / "out.pdf"
        impose(load_layout(one_up()), layered(tmp_path / "in.pdf"), out)
        image = render(out)
        assert colour_at(image, ORIGIN[0] + 70, ORIGIN[1] + 70) == RED
        assert colour_at(image, ORIGIN[0] + 250, ORIGIN[1] + 70) == WHITE

    def test_layer_objects_are_shared(self, tmp_path):
        """The plate's /OCProperties names the very OCG objects the placed page's content uses."""
        out = tmp_path / "out.pdf"
        impose(load_layout(one_up()), layered(tmp_path / "in.pdf"), out)
        with pikepdf.open(out) as pdf:
            off = pdf.Root.OCProperties.D.OFF
            form = pdf.pages[0].Resources.XObject.P1
            assert [str(o.Name) for o in off] == ["Hidden"]
            assert off[0].objgen == form.Resources.Properties.oc2.objgen


class TestDocument:
    def test_output_intent_and_info(self, make_pdf, tmp_path):
        """A PDF/X output intent and its Info keys reach the plate; the producer is ours."""
        src = make_pdf(2, width=A5[0], height=A5[1])
        profile = b"fake ICC profile bytes " * 10
        with pikepdf.open(src, allow_overwriting_input=True) as pdf:
            icc = pdf.make_stream(profile, N=4)
            pdf.Root.OutputIntents = Array([Dictionary(
                Type=Name.OutputIntent, S=Name.GTS_PDFX, OutputConditionIdentifier=String(
                    "FOGRA39"), DestOutputProfile=icc)])
            pdf.docinfo["/GTS_PDFXVersion"] = "PDF/X-4"
            pdf.docinfo["/Title"] = "Brochure"
            pdf.docinfo["/Producer"] = "Someone Else"
            pdf.save(src)
        out = tmp_path / "out.pdf"
        impose(load_layout(one_up()), src, out)
        with pikepdf.open(out) as pdf:
            intent = pdf.Root.OutputIntents[0]
            assert str(intent.OutputConditionIdentifier) == "FOGRA39"
            assert intent.DestOutputProfile.read_bytes() == profile
            assert str(pdf.docinfo["/GTS_PDFXVersion"]) == "PDF/X-4"
            assert str(pdf.docinfo["/Title"]) == "Brochure"
            assert str(pdf.docinfo["/Producer"]).startswith("imposer open engine")
            assert str(pdf.docinfo["/ModDate"]).startswith("D:20")

    def test_xmp_metadata_updated(self, make_pdf, tmp_path):
        """The document XMP is carried over with its title, a new producer and new dates."""
        src = make_pdf(1, width=A5[0], height=A5[1])
        with pikepdf.open(src, allow_overwriting_input=True) as pdf:
            with pdf.open_metadata(set_pikepdf_as_editor=False) as meta:
                meta["dc:title"] = "Spring catalogue"
                meta["xmp:ModifyDate"] = "2001-01-01T00:00:00+00:00"
            pdf.save(src)
        out = tmp_path / "out.pdf"
        impose(load_layout(one_up()), src, out)
        with pikepdf.open(out) as pdf:
            meta = pdf.open_metadata()
            assert meta["dc:title"] == "Spring catalogue"
            assert meta["pdf:Producer"].startswith("imposer open engine")
            assert not meta["xmp:ModifyDate"].startswith("2001")
            assert meta["xmp:MetadataDate"] == meta["xmp:ModifyDate"]

    def test_unreadable_xmp_is_a_warning(self, make_pdf, tmp_path):
        """XMP that does not parse is left out with a warning; the plate is still made."""
        src = make_pdf(1, width=A5[0], height=A5[1])
        with pikepdf.open(src, allow_overwriting_input=True) as pdf:
            pdf.Root.Metadata = pdf.make_stream(b"<x:xmpmeta><<<not xml",
                                                Type=Name.Metadata, Subtype=Name.XML)
            pdf.save(src, fix_metadata_version=False)
        summary = impose(load_layout(one_up()), src, tmp_path / "out.pdf")
        assert summary.warnings == (
            "the document's XMP metadata is unreadable and was left out",)
        with pikepdf.open(tmp_path / "out.pdf") as pdf:
            assert "/Metadata" not in pdf.Root


class TestAnnotations:
    def test_stamp_appearance_printed(self, tmp_path, poppler):
        """A stamp annotation's appearance is flattened into the page and prints on the plate."""
        out = tmp_path / "out.pdf"
        impose(load_layout(one_up()), annotated(tmp_path / "in.pdf"), out)
        assert colour_at(render(out), ORIGIN[0] + 45, ORIGIN[1] + 325) == GREEN
        with pikepdf.open(out) as pdf:
            assert "/Annots" not in pdf.pages[0].obj

    def test_form_value_printed(self, tmp_path, poppler):
        """A filled form field without an appearance stream still prints its value."""
        out = tmp_path / "out.pdf"
        impose(load_layout(one_up()), annotated(tmp_path / "in.pdf"), out)
        assert "HELLO 42" in text_of(out)

    def test_markup_without_appearance_prints(self, tmp_path, poppler):
        """Highlight, ink and square annotations with no /AP print as poppler shows the source."""
        src, out = reviewed(tmp_path / "in.pdf"), tmp_path / "out.pdf"
        impose(load_layout(one_up()), src, out)
        source, plate = render(src), render(out)
        for colour in (YELLOW, RED, BLUE):
            assert count(source, colour) > 50
            assert count(plate, colour) >= 0.8 * count(source, colour), colour
        # the black bar under the marker stays black: the highlight multiplies, not covers
        assert count(plate, BLACK) >= 0.8 * count(source, BLACK) > 100

    def test_circle_without_appearance_prints(self, tmp_path, poppler):
        """A Circle annotation with no /AP prints its ellipse as poppler shows the source."""
        src, out = tmp_path / "in.pdf", tmp_path / "out.pdf"
        pdf = page_pdf(src, b"")
        pdf.pages[0].obj.Annots = Array([pdf.make_indirect(Dictionary(
            Type=Name.Annot, Subtype=Name.Circle, F=4, C=[0, 1, 0], BS=Dictionary(W=4),
            Rect=[60, 100, 260, 300]))])
        pdf.save(src)
        summary = impose(load_layout(one_up()), src, out)
        source, plate = render(src), render(out)
        assert summary.warnings == ()
        assert count(source, GREEN) > 100
        assert count(plate, GREEN) >= 0.8 * count(source, GREEN)
        assert colour_at(plate, ORIGIN[0] + 160, ORIGIN[1] + 200) == WHITE, "stroked, not filled"

    def test_review_tool_page_highlights_print(self, tmp_path, poppler):
        """A review tool's page of real text: its highlights and ink (no /AP) print over the
        words, and only the note is named."""
        src, out = review_page(tmp_path / "in.pdf"), tmp_path / "out.pdf"
        summary = impose(load_layout(same_size(src)), src, out)
        source, plate = render(src), render(out)
        for colour, least in ((YELLOW, 2000), (RED, 50)):
            assert count(source, colour) > least
            assert count(plate, colour) >= 0.9 * count(source, colour), colour
        # the highlighted words stay dark: the marker multiplies over the text (three of
        # the 21 lines lie under it, so a marker covering them would lose about 15%)
        assert count(plate, TEXT) >= 0.95 * count(source, TEXT) > 500
        assert summary.warnings == (
            "annotation without an appearance stream is not printed (the engine cannot draw "
            "it faithfully): page 1 annotation 1 (Text)",)

    def test_pdftex_form_borders_print(self, tmp_path, poppler):
        """A pdfTeX-style form (/NeedAppearances, empty fields, check boxes, one a kid of its
        field) over a page of text: every red /MK border prints."""
        src, out = pdftex_form(tmp_path / "in.pdf"), tmp_path / "out.pdf"
        impose(load_layout(same_size(src)), src, out)
        source, plate = render(src), render(out)
        assert count(source, RED) > 100
        assert count(plate, RED) >= 0.8 * count(source, RED)
        for x, y in ((72, 210), (72, 170), (72, 120), (120, 120)):  # each widget's left edge
            assert colour_at(plate, x + 0.5, y) == colour_at(source, x + 0.5, y) != WHITE

    def test_undrawable_annotation_is_named(self, tmp_path):
        """A note without an appearance is named by page and annotation in the job's warnings."""
        summary = impose(load_layout(one_up()), reviewed(tmp_path / "in.pdf"),
                         tmp_path / "out.pdf")
        assert summary.warnings == (
            "annotation without an appearance stream is not printed (the engine cannot draw "
            "it faithfully): page 1 annotation 4 (Text 'note-1')",)

    def test_subtype_not_a_name_is_unknown(self, tmp_path):
        """An annotation whose /Subtype is not a name (a string here) is named Unknown."""
        pdf = page_pdf(tmp_path / "in.pdf", b"")
        pdf.pages[0].obj.Annots = Array([pdf.make_indirect(Dictionary(
            Type=Name.Annot, Subtype=String("Highlight"), F=4, Rect=[20, 20, 60, 40]))])
        pdf.save(tmp_path / "in.pdf")
        summary = impose(load_layout(one_up()), tmp_path / "in.pdf", tmp_path / "out.pdf")
        assert summary.warnings == (
            "annotation without an appearance stream is not printed (the engine cannot draw "
            "it faithfully): page 1 annotation 1 (Unknown)",)

    def test_need_appearances_keeps_borders_and_ticks(self, tmp_path, poppler):
        """An empty field's border and a ticked check box (border and tick) print as poppler
        shows the source."""
        src, out = form(tmp_path / "in.pdf"), tmp_path / "out.pdf"
        impose(load_layout(one_up()), src, out)
        source, plate = render(src), render(out)
        for colour in (BLUE, RED):  # the borders
            assert count(source, colour) > 20
            assert count(plate, colour) >= 0.8 * count(source, colour), colour
        assert count(plate, BLACK) > 20  # the tick (poppler draws none for the source)

    def test_button_state_from_its_value(self, tmp_path, poppler):
        """A check box with its own per-state appearances but no /AS prints the state its
        value names (a green box), not a border the engine would build."""
        src, out = page_pdf(tmp_path / "in.pdf", b""), tmp_path / "out.pdf"
        on = src.make_stream(b"0 1 0 rg 0 0 40 40 re f", Type=Name.XObject,
                             Subtype=Name.Form, BBox=[0, 0, 40, 40])
        off = src.make_stream(b"", Type=Name.XObject, Subtype=Name.Form, BBox=[0, 0, 40, 40])
        box = src.make_indirect(Dictionary(
            Type=Name.Annot, Subtype=Name.Widget, FT=Name.Btn, T=String("ok"), F=4,
            V=Name("/On"), Rect=[40, 300, 80, 340], MK=Dictionary(BC=[1, 0, 0]),
            AP=Dictionary(N=Dictionary({"/On": on, "/Off": off}))))
        src.pages[0].obj.Annots = Array([box])
        src.Root.AcroForm = Dictionary(Fields=[box])
        src.save(tmp_path / "in.pdf")
        summary = impose(load_layout(one_up()), tmp_path / "in.pdf", out)
        plate = render(out)
        assert colour_at(plate, ORIGIN[0] + 60, ORIGIN[1] + 320) == GREEN
        assert count(plate, RED) == 0 and summary.warnings == ()

    def test_drop(self, tmp_path, poppler):
        """``annotations: drop`` leaves annotations and field values off the plate."""
        out = tmp_path / "out.pdf"
        impose(load_layout(one_up(annotations="drop")), annotated(tmp_path / "in.pdf"), out)
        assert colour_at(render(out), ORIGIN[0] + 45, ORIGIN[1] + 325) == WHITE
        assert "HELLO" not in text_of(out)


def with_boxes(path: Path, **boxes) -> Path:
    """Set page boxes (lists in points) on every page of *path*, in place."""
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        for page in pdf.pages:
            for name, value in boxes.items():
                page.obj[f"/{name}"] = Array(value)
        pdf.save(path)
    return path


class TestBleed:
    def test_source_bleed_box_limits_bleed(self, make_pdf, tmp_path):
        """Layout bleed 3 mm, source BleedBox 1 mm past its trim: 1 mm is drawn, and said."""
        src = make_pdf(1, width=A5[0], height=A5[1], trim_inset=5 * MM)
        with_boxes(src, BleedBox=[4 * MM, 4 * MM, A5[0] + 6 * MM, A5[1] + 6 * MM])
        out = tmp_path / "out.pdf"
        summary = impose(load_layout(one_up(bleed=3)), src, out)
        (placed,) = placements(out)[0]
        assert placed.clip == pytest.approx((30 * MM, 42.5 * MM, 180 * MM, 254.5 * MM), abs=0.01)
        assert summary.warnings == (
            "page 1 has only 1 mm of bleed beyond its TrimBox; the layout asks for 3 mm "
            "(the bleed drawn is what the page offers)",)

    def test_page_without_bleed_is_a_warning(self, make_pdf, tmp_path):
        """Pages whose MediaBox is their trim are clipped at the trim and reported together."""
        out = tmp_path / "out.pdf"
        summary = impose(load_layout(one_up(bleed=3)), make_pdf(3, width=A5[0], height=A5[1]),
                         out)
        assert placements(out)[0][0].clip == pytest.approx(
            (31 * MM, 43.5 * MM, 179 * MM, 253.5 * MM), abs=0.01)
        assert summary.warnings == (
            "pages 1-3 have no bleed beyond their TrimBox; the layout asks for 3 mm "
            "(the bleed drawn is what the page offers)",)

    def test_enough_bleed_is_silent(self, make_pdf, tmp_path):
        """A page that offers more bleed than asked is clipped at the layout's bleed, silently."""
        src = make_pdf(1, width=A5[0], height=A5[1], trim_inset=5 * MM)
        out = tmp_path / "out.pdf"
        summary = impose(load_layout(one_up(bleed=3)), src, out)
        assert placements(out)[0][0].clip == pytest.approx(
            (28 * MM, 40.5 * MM, 182 * MM, 256.5 * MM), abs=0.01)
        assert summary.warnings == ()


def mixed(make_pdf, *sizes: tuple[float, float]) -> Path:
    """Return a PDF whose pages have the given sizes, numbered in order."""
    first = make_pdf(1, width=sizes[0][0], height=sizes[0][1])
    with pikepdf.open(first, allow_overwriting_input=True) as pdf:
        for n, (w, h) in enumerate(sizes[1:], start=2):
            with pikepdf.open(make_pdf(n, width=w, height=h)) as other:
                pdf.pages.append(other.pages[n - 1])
        pdf.save(first)
    return first


A4_LANDSCAPE = (A4[1], A4[0])
A6 = (105 * MM, 148 * MM)


def twoup(**fields) -> dict:
    data = {"version": 1, "kind": "nup", "sheet": {"size": "SRA3", "orientation": "landscape"},
            "grid": {"cols": 2, "rows": 1}}
    data.update(fields)
    return data


class TestRotateToFit:
    def test_landscape_page_turned(self, make_pdf, tmp_path):
        """A landscape page in a portrait n-up job is turned 90 degrees anticlockwise onto its cell."""
        out = tmp_path / "out.pdf"
        summary = impose(load_layout(twoup()), mixed(make_pdf, A4, A4_LANDSCAPE), out)
        first, second = placements(out)[0]
        assert second.matrix == pytest.approx((0, 1, -1, 0, 435 * MM, 11.5 * MM), abs=0.01)
        assert second.clip == pytest.approx((225 * MM, 11.5 * MM, 435 * MM, 308.5 * MM),
                                             abs=0.01)
        assert first.matrix == pytest.approx((1, 0, 0, 1, 15 * MM, 11.5 * MM), abs=0.01)
        assert summary.turned == (2,)

    def test_off_for_booklets(self, make_pdf, tmp_path):
        """A booklet does not turn pages by default: the landscape page is refused by size."""
        layout = {"version": 1, "kind": "saddle",
                  "sheet": {"size": "SRA3", "orientation": "landscape"}}
        with pytest.raises(InputPdfError, match=r"input page 2 is 297 mm .* but page 1 is 210"):
            impose(load_layout(layout), mixed(make_pdf, A4, A4_LANDSCAPE), tmp_path / "o.pdf")

    def test_switched_off(self, make_pdf, tmp_path):
        """``rotate_to_fit: false`` on n-up refuses the landscape page instead."""
        with pytest.raises(InputPdfError, match="input page 2 is 297 mm"):
            impose(load_layout(twoup(rotate_to_fit=False)), mixed(make_pdf, A4, A4_LANDSCAPE),
                   tmp_path / "o.pdf")

    def test_turned_page_under_center_is_not_clipped(self, make_pdf, tmp_path):
        """A landscape A5 in an A4 portrait cell is turned and centred whole, not clipped."""
        out = tmp_path / "out.pdf"
        impose(load_layout(twoup(mixed_sizes="center")),
               mixed(make_pdf, A4, (A5[1], A5[0])), out)
        second = placements(out)[0][1]
        x0 = 225 * MM + (210 - 148) / 2 * MM
        y0 = 11.5 * MM + (297 - 210) / 2 * MM
        assert second.clip == pytest.approx((x0, y0, x0 + 148 * MM, y0 + 210 * MM), abs=0.01)


class TestFit:
    @pytest.mark.parametrize("fit, scales", [
        ("shrink", (148 / 210, 1.0)),
        ("fit", (148 / 210, 148 / 105)),
        ("none", (1.0, 1.0)),
    ])
    def test_scale_per_page(self, make_pdf, tmp_path, fit, scales):
        """fit scales an A4 and an A6 page into A5 cells as asked; the summary gives each scale."""
        layout = one_up(cell={"width": 148, "height": 210}, fit=fit, mixed_sizes="center")
        summary = impose(load_layout(layout), mixed(make_pdf, A4, A6), tmp_path / "out.pdf")
        assert summary.scales == pytest.approx(scales, abs=1e-6)

    def test_shrunk_geometry(self, make_pdf, tmp_path):
        """An A4 page shrunk into an A5 cell fills its width and is centred in its height."""
        out = tmp_path / "out.pdf"
        impose(load_layout(one_up(cell={"width": 148, "height": 210}, fit="shrink")),
               make_pdf(1, width=A4[0], height=A4[1]), out)
        (placed,) = placements(out)[0]
        s = 148 / 210
        y0 = 43.5 * MM + (210 - 297 * s) / 2 * MM
        assert placed.matrix == pytest.approx((s, 0, 0, s, 31 * MM, y0), abs=0.01)
        assert placed.clip == pytest.approx((31 * MM, y0, 179 * MM, y0 + 297 * s * MM),
                                            abs=0.01)


class TestTolerance:
    ROUNDED_A5 = (419.53, 595.28)

    @pytest.mark.parametrize("preset", ["a5-booklet-a4", "a5-4up-sra3"])
    def test_rounded_a5_fits(self, make_pdf, tmp_path, preset):
        """An A5 PDF written as 419.53 x 595.28 pt fits the A5 presets (tolerance 0.05 pt)."""
        summary = impose(load_layout(preset), make_pdf(8, width=419.53, height=595.28),
                         tmp_path / "out.pdf")
        assert summary.pages_placed == 8

    def test_overflow_message_never_contradicts_itself(self, make_pdf, tmp_path):
        """A grid 0.06 pt too wide names two different sizes and by how much it overflows."""
        layout = twoup(units="pt", sheet={"width": 2 * A5[0] - 0.06, "height": 700})
        with pytest.raises(LayoutError) as info:
            impose(load_layout(layout), make_pdf(2, width=A5[0], height=A5[1]),
                   tmp_path / "o.pdf")
        message = str(info.value)
        need, holds = re.search(r"need (.*?) x .* holds (.*?) x", message).groups()
        assert need != holds
        assert "too wide by 0.021 mm (0.06 pt)" in message
