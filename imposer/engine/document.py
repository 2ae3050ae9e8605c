"""What a plate keeps of its source document besides the pages: layers, colour, metadata.

A press needs more than the page content: the optional content configuration
(so a layer hidden in the source stays hidden on the plate), the output intent
of a PDF/X or PDF/A file (the colour condition the printer proofs to), and the
document's metadata, with the producer and dates updated. Annotations are
flattened into the pages first (their print appearances, form field values
included, built from their geometry where they have none), because a form
XObject made from a page carries no annotations.
"""

from __future__ import annotations

import datetime
import logging
from xml.etree import ElementTree

import pikepdf

from imposer.engine.appearances import Built, build_missing

logger = logging.getLogger(__name__)

#: Document information keys copied to the plate (the rest describe the source file).
_INFO_KEYS = ("/Title", "/Author", "/Subject", "/Keywords", "/Creator", "/Trapped",
              "/GTS_PDFXVersion", "/GTS_PDFXConformance", "/CreationDate")
_RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}RDF"
PRODUCER = f"imposer open engine (pikepdf {pikepdf.__version__})"


def flatten_annotations(src: pikepdf.Pdf) -> Built:
    """Draw the print appearance of every annotation into its page; say what was built.

    Annotations without an appearance stream get one first (appearances), and
    then form fields their values: a filled field may have none when the filler
    set /NeedAppearances, and qpdf writes the value into the stream built here,
    inside the field's border.
    """
    if not any("/Annots" in page.obj for page in src.pages):
        return Built()
    built = build_missing(src)
    form = src.Root.get("/AcroForm")
    if isinstance(form, pikepdf.Dictionary) and "/Fields" in form:
        src.generate_appearance_streams()
    src.flatten_annotations(mode="print")
    return built


def carry_over(src: pikepdf.Pdf, out: pikepdf.Pdf) -> list[str]:
    """Copy layers, output intents and metadata from *src* to *out*; return warnings.

    Call it after the pages are copied: copy_foreign maps an object already
    copied to the same copy, so the layers named in the pages' content and in
    /OCProperties stay one and the same.
    """
    warnings: list[str] = []
    root = src.Root
    for key in ("/OCProperties", "/OutputIntents"):
        if isinstance(root.get(key), (pikepdf.Dictionary, pikepdf.Array)):
            out.Root[key] = _copy(src, out, root[key])
    if isinstance(root.get("/Lang"), pikepdf.String):
        out.Root.Lang = root.Lang
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    info = src.trailer.get("/Info")
    if isinstance(info, pikepdf.Dictionary):
        for key in _INFO_KEYS:
            if key in info and isinstance(info[key], (pikepdf.String, pikepdf.Name)):
                out.docinfo[key] = info[key]
    out.docinfo["/Producer"] = PRODUCER
    out.docinfo["/ModDate"] = now.strftime("D:%Y%m%d%H%M%SZ")
    if isinstance(root.get("/Metadata"), pikepdf.Stream):
        if _is_xmp(root.Metadata):
            out.Root.Metadata = _copy(src, out, root.Metadata)
            with out.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False) as meta:
                meta["pdf:Producer"] = PRODUCER
                meta["xmp:ModifyDate"] = now.isoformat()
                meta["xmp:MetadataDate"] = now.isoformat()
        else:
            warnings.append("the document's XMP metadata is unreadable and was left out")
    return warnings


def _is_xmp(stream: pikepdf.Stream) -> bool:
    """Say whether a metadata stream is well-formed XML holding an RDF description."""
    try:
        data = stream.read_bytes()
        if len(data) > 4 << 20:
            return False
        tree = ElementTree.fromstring(data)
    except (pikepdf.PikepdfError, ElementTree.ParseError, ValueError):
        return False
    return any(element.tag == _RDF for element in tree.iter())


def _copy(src: pikepdf.Pdf, out: pikepdf.Pdf, value: pikepdf.Object) -> pikepdf.Object:
    """Copy *value* into *out*; a direct object is made indirect first (copy_foreign's rule)."""
    if not value.is_indirect:
        value = src.make_indirect(value)
    return out.copy_foreign(value)
