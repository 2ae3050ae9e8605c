"""The standards a source declares (PDF/A, PDF/X), what keeping them asks of the plate.

A plate carries its source's XMP and Info over, and with them its claims to
be PDF/A-1b or PDF/X-1a. A claim is a promise a RIP or a preflight acts on,
so the plate keeps only the claims it meets: it is saved in the source's PDF
version without object or cross-reference streams where the standard predates
them (PDF/A-1, PDF/X-1a, PDF/X-3: PDF 1.3 or 1.4), its marks are drawn in the
output intent's process colour space, its slug font is embedded (printmarks).
What the engine cannot keep (an appearance it had to build with transparency
where the standard forbids it, a source already past the standard's version)
is removed from the plate's metadata, with a warning that says why.
"""

from __future__ import annotations

import re
from xml.etree import ElementTree

import attrs
import pikepdf

#: Output intent profile components -> the process colour space marks are drawn in.
PROCESS = {1: "/DeviceGray", 3: "/DeviceRGB", 4: "/DeviceCMYK"}
#: PDF/X version prefix -> the highest PDF version it allows and whether transparency is allowed.
_PDFX = (("PDF/X-1a:2001", "1.3", False), ("PDF/X-1:", "1.3", False),
         ("PDF/X-1a:2003", "1.4", False), ("PDF/X-3:2002", "1.3", False),
         ("PDF/X-3:2003", "1.4", False), ("PDF/X-4", "1.6", True), ("PDF/X-5", "1.6", True))
_PDFA = {1: ("1.4", False), 2: ("1.7", True), 3: ("1.7", True), 4: ("2.0", True)}
#: XMP properties that make a claim, by the standard they belong to.
_XMP_KEYS = {"PDF/A": ("pdfaid:part", "pdfaid:conformance", "pdfaid:amd"),
             "PDF/X": ("pdfxid:GTS_PDFXVersion", "pdfx:GTS_PDFXVersion",
                       "pdfx:GTS_PDFXConformance")}
_INFO_KEYS = {"PDF/A": (), "PDF/X": ("/GTS_PDFXVersion", "/GTS_PDFXConformance")}
_NS = {"pdfaid": "http://www.aiim.org/pdfa/ns/id/",
       "pdfxid": "http://www.npes.org/pdfx/ns/id/"}


@attrs.frozen(kw_only=True)
class Claim:
    """One standard the source declares, and what keeping it asks of the plate."""

    #: What the source says, e.g. "PDF/A-1b" or "PDF/X-1a:2001".
    name: str
    #: "PDF/A" or "PDF/X".
    family: str
    #: The highest PDF version the standard allows.
    max_version: str
    #: Whether the standard allows transparency (soft masks, opacity, blend modes).
    transparency: bool

    @property
    def object_streams(self) -> bool:
        """Object and cross-reference streams came with PDF 1.5."""
        return _version(self.max_version) >= (1, 5)


@attrs.frozen(kw_only=True)
class Standards:
    """Every claim of one source, and its output intent's process colour space."""

    claims: tuple[Claim, ...] = ()
    #: "/DeviceCMYK", "/DeviceRGB" or "/DeviceGray"; None without a usable output intent.
    process: str | None = None

    @property
    def object_streams(self) -> bool:
        return all(c.object_streams for c in self.claims)

    def broken(self, version: str, transparent: bool, marks: bool) -> dict[str, str]:
        """Return each claim the plate cannot keep, with the reason, in words."""
        reasons = {}
        for claim in self.claims:
            if _version(version) > _version(claim.max_version):
                reasons[claim.name] = (f"the source is PDF {version}, and {claim.name} allows "
                                       f"at most PDF {claim.max_version}")
            elif transparent and not claim.transparency:
                reasons[claim.name] = (f"an annotation's appearance was built with "
                                       f"transparency, which {claim.name} forbids")
            elif marks and self.process is None:
                reasons[claim.name] = ("the output intent names no process colour space the "
                                       "marks could be drawn in")
        return reasons


def _version(text: str) -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else (1, 3)


def read_standards(pdf: pikepdf.Pdf) -> Standards:
    """Return the claims *pdf* makes in its XMP and Info, and its intent's process space."""
    claims = []
    part, conformance, pdfx = _xmp_claims(pdf)
    if part in _PDFA:
        max_version, transparency = _PDFA[part]
        claims.append(Claim(name=f"PDF/A-{part}{conformance.lower()}", family="PDF/A",
                            max_version=max_version, transparency=transparency))
    info = pdf.trailer.get("/Info")
    version = info.get("/GTS_PDFXVersion") if isinstance(info, pikepdf.Dictionary) else None
    name = str(version) if isinstance(version, pikepdf.String) else pdfx
    for prefix, max_version, transparency in _PDFX:
        if name and name.startswith(prefix):
            claims.append(Claim(name=name, family="PDF/X", max_version=max_version,
                                transparency=transparency))
            break
    return Standards(claims=tuple(claims), process=_process(pdf, bool(name)))


def _xmp_claims(pdf: pikepdf.Pdf) -> tuple[int | None, str, str | None]:
    """Return the XMP's PDF/A part and conformance and its PDF/X version, if it has them."""
    stream = pdf.Root.get("/Metadata")
    if not isinstance(stream, pikepdf.Stream):
        return None, "", None
    try:
        data = stream.read_bytes()
        tree = ElementTree.fromstring(data) if len(data) <= 4 << 20 else None
    except (pikepdf.PikepdfError, ElementTree.ParseError, ValueError):
        return None, "", None
    if tree is None:
        return None, "", None
    values: dict[str, str] = {}
    for element in tree.iter():
        for key, ns in _NS.items():  # a property is written as an element or an attribute
            for field in ("part", "conformance", "GTS_PDFXVersion"):
                tag = f"{{{ns}}}{field}"
                text = element.text if element.tag == tag else element.attrib.get(tag)
                if text and text.strip():
                    values.setdefault(f"{key}:{field}", text.strip())
    part = values.get("pdfaid:part", "")
    return (int(part) if part.isdigit() else None, values.get("pdfaid:conformance", ""),
            values.get("pdfxid:GTS_PDFXVersion"))


def _process(pdf: pikepdf.Pdf, pdfx: bool) -> str | None:
    """Return the process colour space of the output intent (PDF/X's first, else any)."""
    intents = pdf.Root.get("/OutputIntents")
    if not isinstance(intents, pikepdf.Array):
        return None
    intents = [i for i in intents if isinstance(i, pikepdf.Dictionary)]
    intents.sort(key=lambda i: i.get("/S") != pikepdf.Name.GTS_PDFX)
    for intent in intents:
        profile = intent.get("/DestOutputProfile")
        if isinstance(profile, pikepdf.Stream):
            components = profile.get("/N")
            return PROCESS.get(int(components)) if isinstance(components, int) else None
        if pdfx and intent.get("/S") == pikepdf.Name.GTS_PDFX:
            return "/DeviceCMYK"  # a registered print condition without a profile: press CMYK
    return None


def revoke(out: pikepdf.Pdf, standards: Standards, reasons: dict[str, str]) -> list[str]:
    """Remove the broken claims from *out*'s XMP and Info; return one warning for each."""
    families = {c.family for c in standards.claims if c.name in reasons}
    if isinstance(out.Root.get("/Metadata"), pikepdf.Stream):
        with out.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False) as meta:
            for family in families:
                for key in _XMP_KEYS[family]:
                    if key in meta:
                        del meta[key]
    for family in families:
        for key in _INFO_KEYS[family]:
            if key in out.docinfo:
                del out.docinfo[key]
    return [f"the source claims {name}, which the plate cannot keep ({reason}); the claim "
            f"was removed from the plate's metadata" for name, reason in reasons.items()]
