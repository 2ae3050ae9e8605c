"""The plate claims only what it meets: PDF/A-1b and PDF/X-1a rules read back from the file.

``violations`` checks what can be checked from the file alone, the rules a
preflight starts with: the header's PDF version, no object or cross-reference
streams, every font embedded, no device colour the output intent does not
allow, no transparency, an unfiltered XMP stream and a file /ID. The sources
are PDF/A-1b and PDF/X-1a files made here, each passing these rules, one of
them a page of text in an embedded TrueType font written by matplotlib.
"""

from __future__ import annotations

from pathlib import Path

import pikepdf
from pikepdf import Array, Dictionary, Name, String

from imposer.engine import impose, load_layout
from tests.engine.test_engine import A5, MM
from tests.fixtures.documents import claim_pdfa_1b, pdfa_1b_document

#: Every printer's mark and a slug: A5 with 3 mm bleed on an A4 sheet.
MARKED = {"version": 1, "kind": "nup", "sheet": {"size": "A4", "orientation": "portrait"},
          "grid": {"cols": 1, "rows": 1}, "bleed": 3,
          "marks": {"registration": True, "colour_bar": True, "slug": True}}
#: Device colour operators and the colour space each paints in.
_DEVICE_OPS = {"k": "/DeviceCMYK", "K": "/DeviceCMYK", "rg": "/DeviceRGB", "RG": "/DeviceRGB",
               "g": "/DeviceGray", "G": "/DeviceGray"}
#: Output intent process space -> device spaces a PDF/A-1 or PDF/X-1a file may paint in.
ALLOWED = {"/DeviceRGB": {"/DeviceRGB", "/DeviceGray"},
           "/DeviceCMYK": {"/DeviceCMYK", "/DeviceGray"}}


def artwork(content: bytes) -> pikepdf.Pdf:
    """Return a one-page A5 document with 3 mm bleed (not yet saved) drawing *content*."""
    pdf = pikepdf.new()
    bleed = 3 * MM
    page = Dictionary(Type=Name.Page, MediaBox=[0, 0, A5[0] + 2 * bleed, A5[1] + 2 * bleed],
                      TrimBox=[bleed, bleed, A5[0] + bleed, A5[1] + bleed],
                      Resources=Dictionary(), Contents=pdf.make_stream(content))
    pdf.pages.append(pikepdf.Page(page))
    return pdf


def save_old(pdf: pikepdf.Pdf, path: Path, version: str) -> Path:
    pdf.save(path, force_version=version, object_stream_mode=pikepdf.ObjectStreamMode.disable)
    return path


def pdfa_1b(path: Path) -> Path:
    """Write a PDF/A-1b file: PDF 1.4, an sRGB output intent, RGB art, the XMP claim."""
    pdf = artwork(b"0.8 0.1 0.1 rg 0 0 500 700 re f 0 0 1 RG 4 w 50 50 m 300 300 l S")
    claim_pdfa_1b(pdf, "Annual report")
    return save_old(pdf, path, "1.4")


def pdfx_1a(path: Path) -> Path:
    """Write a PDF/X-1a:2001 file: PDF 1.3, CMYK art, the FOGRA39 registered condition."""
    pdf = artwork(b"0 0.6 1 0 k 0 0 500 700 re f")
    pdf.Root.OutputIntents = Array([Dictionary(
        Type=Name.OutputIntent, S=Name.GTS_PDFX, OutputConditionIdentifier=String("FOGRA39"),
        RegistryName=String("http://www.color.org"))])
    for key in ("/GTS_PDFXVersion", "/GTS_PDFXConformance"):
        pdf.docinfo[key] = "PDF/X-1a:2001"
    pdf.docinfo["/Trapped"] = Name("/False")
    pdf.docinfo["/Title"] = "Flyer"
    return save_old(pdf, path, "1.3")


def highlighted(path: Path) -> Path:
    """Add a highlight without an appearance stream to the PDF/A-1b file at *path*."""
    with pikepdf.open(path, allow_overwriting_input=True) as pdf:
        pdf.pages[0].obj.Annots = Array([pdf.make_indirect(Dictionary(
            Type=Name.Annot, Subtype=Name.Highlight, F=4, C=[1, 1, 0], Rect=[40, 40, 200, 60],
            QuadPoints=[40, 60, 200, 60, 40, 40, 200, 40]))])
        save_old(pdf, path, "1.4")
    return path


def _forms(resources: object, seen: set) -> list[pikepdf.Stream]:
    """Return the form XObjects reachable from *resources*, each once."""
    found = []
    xobjects = resources.get("/XObject", {}) if isinstance(resources, Dictionary) else {}
    for key in list(xobjects.keys()):
        form = xobjects[key]
        if form.get("/Subtype") == Name.Form and form.objgen not in seen:
            seen.add(form.objgen)
            found += [form, *_forms(form.get("/Resources"), seen)]
    return found


def _spaces(space: object, resources: Dictionary) -> set[str]:
    """Return the device spaces a colour space (a name or an array) paints in."""
    if isinstance(space, Name) and str(space).startswith("/Device"):
        return {str(space)}
    if isinstance(space, Name):
        named = resources.get("/ColorSpace", {}).get(str(space))
        return _spaces(named, resources) if named is not None else set()
    if isinstance(space, Array) and len(space):
        kind = space[0]
        if kind in (Name.Separation, Name.DeviceN):
            return _spaces(space[2], resources)
        if kind == Name.Indexed:
            return _spaces(space[1], resources)
    return set()  # ICCBased, CalRGB, Lab: device independent


def violations(path: Path, max_version: str) -> list[str]:
    """Return the rules of PDF/A-1 and PDF/X-1a checkable from the file that *path* breaks."""
    data = path.read_bytes()
    found = []
    if data[5:8].decode() > max_version:
        found.append(f"PDF version {data[5:8].decode()} above {max_version}")
    if b"/ObjStm" in data or b"/XRef" in data:
        found.append("object or cross-reference streams")
    with pikepdf.open(path) as pdf:
        intent = pdf.Root.OutputIntents[0]
        profile = intent.get("/DestOutputProfile")
        process = {3: "/DeviceRGB", 4: "/DeviceCMYK"}[int(profile.N) if profile else 4]
        if "/ID" not in pdf.trailer:
            found.append("no file /ID")
        if "/Metadata" in pdf.Root and "/Filter" in pdf.Root.Metadata:
            found.append("XMP stream is filtered")
        for page in pdf.pages:
            if page.obj.get("/Group", {}).get("/S") == Name.Transparency:
                found.append("page transparency group")
            seen: set = set()
            for holder in [page.obj, *_forms(page.obj.get("/Resources"), seen)]:
                found += _holder_violations(holder, process)
    return found


def _holder_violations(holder: object, process: str) -> list[str]:
    """Check one page or form: fonts embedded, device colours allowed, no transparency."""
    found, resources = [], holder.get("/Resources", Dictionary())
    for name, font in resources.get("/Font", {}).items():
        fonts = list(font.DescendantFonts) if font.Subtype == Name.Type0 else [font]
        for each in fonts:
            descriptor = each.get("/FontDescriptor", {})
            if each.Subtype != Name.Type3 and not any(
                    k in descriptor for k in ("/FontFile", "/FontFile2", "/FontFile3")):
                found.append(f"font {name} ({each.get('/BaseFont')}) not embedded")
    for name, state in resources.get("/ExtGState", {}).items():
        if float(state.get("/CA", 1)) < 1 or float(state.get("/ca", 1)) < 1 \
                or state.get("/BM", Name.Normal) not in (Name.Normal, Name.Compatible) \
                or state.get("/SMask", Name("/None")) != Name("/None"):
            found.append(f"transparency in graphics state {name}")
    if isinstance(holder, pikepdf.Stream) and \
            holder.get("/Group", {}).get("/S") == Name.Transparency:
        found.append("form transparency group")
    used = set()
    for operands, op in pikepdf.parse_content_stream(holder):
        if str(op) in _DEVICE_OPS:
            used.add(_DEVICE_OPS[str(op)])
        elif str(op) in ("cs", "CS"):
            used |= _spaces(operands[0], resources)
    for image in resources.get("/XObject", {}).values():
        if image.get("/Subtype") == Name.Image:
            used |= _spaces(image.get("/ColorSpace"), resources)
    found += [f"{space} under a {process} output intent"
              for space in sorted(used - ALLOWED[process])]
    return found


def claims(path: Path) -> dict[str, str]:
    """Return the claims the plate makes in its XMP and Info."""
    with pikepdf.open(path) as pdf:
        meta = pdf.open_metadata()
        found = {key: str(meta[key]) for key in ("pdfaid:part", "pdfaid:conformance")
                 if key in meta}
        for key in ("/GTS_PDFXVersion", "/GTS_PDFXConformance"):
            if key in pdf.docinfo:
                found[key] = str(pdf.docinfo[key])
    return found


class TestStandards:
    def test_sources_pass_the_rules(self, tmp_path):
        """The PDF/A-1b and PDF/X-1a sources made here pass the checks the plates face."""
        assert violations(pdfa_1b(tmp_path / "a.pdf"), "1.4") == []
        assert violations(pdfx_1a(tmp_path / "x.pdf"), "1.3") == []

    def test_pdfa_1b_plate_keeps_its_claim(self, tmp_path):
        """A PDF/A-1b source with every mark gives a plate that is PDF/A-1b by the rules."""
        out = tmp_path / "out.pdf"
        summary = impose(load_layout(MARKED), pdfa_1b(tmp_path / "in.pdf"), out,
                         slug_fields={"job_id": "J-1", "tenant_id": "acme"})
        assert summary.warnings == ()
        assert violations(out, "1.4") == []
        assert claims(out) == {"pdfaid:part": "1", "pdfaid:conformance": "B"}

    def test_text_pdfa_plate_keeps_its_claim(self, tmp_path):
        """A PDF/A-1b page of text (embedded TrueType, sRGB intent, US Letter) with every
        mark on SRA3 stays PDF/A-1b by the rules, its font still embedded."""
        source, out = pdfa_1b_document(tmp_path / "in.pdf"), tmp_path / "out.pdf"
        assert violations(source, "1.4") == []
        layout = {**MARKED, "sheet": {"size": "SRA3", "orientation": "portrait"}}
        summary = impose(load_layout(layout), source, out)
        # a text page comes without bleed; nothing else is worth a warning
        assert [w for w in summary.warnings if "bleed" not in w] == []
        assert violations(out, "1.4") == []
        assert claims(out) == {"pdfaid:part": "1", "pdfaid:conformance": "B"}
        with pikepdf.open(out) as pdf:
            assert b"DejaVuSans" in b"".join(
                bytes(str(each.get("/BaseFont")), "ascii") for each in pdf.objects
                if isinstance(each, Dictionary) and each.get("/Type") == Name.Font)

    def test_pdfx_1a_plate_keeps_its_claim(self, tmp_path):
        """A PDF/X-1a:2001 source with every mark gives a PDF 1.3 plate that keeps the rules."""
        out = tmp_path / "out.pdf"
        summary = impose(load_layout(MARKED), pdfx_1a(tmp_path / "in.pdf"), out)
        assert summary.warnings == ()
        assert violations(out, "1.3") == []
        assert claims(out) == {"/GTS_PDFXVersion": "PDF/X-1a:2001",
                               "/GTS_PDFXConformance": "PDF/X-1a:2001"}

    def test_claim_that_cannot_be_kept_is_removed(self, tmp_path):
        """A highlight needs transparency, which PDF/A-1 forbids: the claim goes, with a warning."""
        out = tmp_path / "out.pdf"
        summary = impose(load_layout(MARKED), highlighted(pdfa_1b(tmp_path / "in.pdf")), out)
        assert claims(out) == {}
        assert summary.warnings == (
            "the source claims PDF/A-1b, which the plate cannot keep (an annotation's "
            "appearance was built with transparency, which PDF/A-1b forbids); the claim was "
            "removed from the plate's metadata",)
        with pikepdf.open(out) as pdf:
            assert pdf.open_metadata()["dc:title"] == "Annual report"  # the rest stays

    def test_slug_font_is_embedded(self, make_pdf, tmp_path):
        """The slug's font travels in the plate, whatever the source claims."""
        out = tmp_path / "out.pdf"
        impose(load_layout(MARKED), make_pdf(1, width=A5[0], height=A5[1]), out)
        with pikepdf.open(out) as pdf:
            font = pdf.pages[0].Resources.Font.Slug
            assert font.Subtype == Name.TrueType
            assert font.FontDescriptor.FontFile2.read_bytes()[:4] == b"\0\1\0\0"

    def test_unclaimed_plate_uses_object_streams(self, make_pdf, tmp_path):
        """Without a claim the plate keeps its object streams (smaller), as PDF 1.5."""
        out = tmp_path / "out.pdf"
        impose(load_layout(MARKED), make_pdf(1, width=A5[0], height=A5[1]), out)
        assert out.read_bytes()[:8] == b"%PDF-1.5" and b"/ObjStm" in out.read_bytes()
