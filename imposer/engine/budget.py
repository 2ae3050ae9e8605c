"""The engine's budget: limits checked before imposing, so a hostile input fails in seconds.

A decompression bomb or a 100 x 100 grid of 2,000 pages would hold a slot for
minutes and then die of memory; checked up front it fails at once as TooLarge
(``too_large``), a permanent failure. Every check is cheap: counts from the
cross-reference table and the page tree, stream dictionaries, and a streaming
decode (never more than one chunk in memory) only for a stream whose
compressed size could expand past the limit.

The defaults are about five times what the 2,000-page benchmark needs (see
docs/layout-spec.rst, "Budget"), so no real job comes near them.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import attrs
import pikepdf

from imposer.errors import TooLarge

#: Worst-case expansion of one decoding step; image codecs are judged by their pixels.
_RATIO = {"/FlateDecode": 1032, "/Fl": 1032, "/LZWDecode": 2730, "/LZW": 2730,
          "/RunLengthDecode": 128, "/RL": 128, "/ASCIIHexDecode": 1, "/AHx": 1,
          "/ASCII85Decode": 1, "/A85": 1}
_IMAGE_CODECS = {"/DCTDecode", "/DCT", "/JPXDecode", "/JBIG2Decode", "/CCITTFaxDecode", "/CCF"}
_CHUNK = 1 << 20
MM2 = (72 / 25.4) ** 2


@attrs.frozen(kw_only=True)
class Budget:
    """What one imposition may use; pass ``impose(..., budget=Budget(max_pages=...))``."""

    #: Input file size, bytes.
    max_input_bytes: int = 1 << 30
    #: Pages in the input.
    max_pages: int = 5_000
    #: Objects in the input's cross-reference table.
    max_objects: int = 500_000
    #: Decoded size of any one non-image stream (content, form, font), bytes.
    max_stream_bytes: int = 256 << 20
    #: Pixels of any one image, as its dictionary declares them.
    max_image_pixels: int = 400_000_000
    #: Area of one sheet, square millimetres (4 m2; SRA1 is 0.58 m2).
    max_sheet_area_mm2: float = 4_000_000.0
    #: Sheet sides written.
    max_sides: int = 20_000
    #: Placements of pages on sheets in all (a step-and-repeat page counts once per cell).
    max_placements: int = 200_000

    def check_file(self, size: int) -> None:
        """Refuse an input file over the byte limit before opening it."""
        if size > self.max_input_bytes:
            raise TooLarge(f"input PDF is {size:,} bytes; the budget allows "
                           f"{self.max_input_bytes:,}")

    def check_document(self, pdf: pikepdf.Pdf) -> None:
        """Refuse too many objects or pages, then any stream or image over its limit."""
        size = pdf.trailer.get("/Size")
        objects = int(size) if isinstance(size, int) else 0
        if objects > self.max_objects:
            raise TooLarge(f"input PDF has {objects:,} objects; the budget allows "
                           f"{self.max_objects:,}")
        pages = len(pdf.pages)
        if pages > self.max_pages:
            raise TooLarge(f"input PDF has {pages:,} pages; the budget allows "
                           f"{self.max_pages:,}")
        for count, obj in enumerate(pdf.objects):
            if count >= self.max_objects:
                raise TooLarge(f"input PDF has more than {self.max_objects:,} objects")
            if isinstance(obj, pikepdf.Stream):
                self.check_stream(obj)

    def check_stream(self, stream: pikepdf.Stream) -> None:
        """Refuse an image with too many pixels or a stream that decodes past the limit."""
        where = f"stream {stream.objgen[0]}" if stream.objgen[0] else "a stream"
        if stream.get("/Subtype") == pikepdf.Name.Image:
            width, height = stream.get("/Width", 0), stream.get("/Height", 0)
            if isinstance(width, int) and isinstance(height, int) \
                    and width * height > self.max_image_pixels:
                raise TooLarge(f"input PDF image ({where}) is {int(width):,} x {int(height):,} "
                               f"pixels; the budget allows {self.max_image_pixels:,} pixels")
            return
        filters = filter_names(stream)
        if not filters or any(f in _IMAGE_CODECS for f in filters):
            return
        length = stream.get("/Length")
        raw = int(length) if isinstance(length, int) else len(stream.read_raw_bytes())
        worst = raw
        for name in filters:
            worst *= _RATIO.get(name, 1)
        if worst <= self.max_stream_bytes:
            return
        if any(f not in ("/FlateDecode", "/Fl") for f in filters):
            raise TooLarge(f"input PDF {where} ({', '.join(filters)}, {raw:,} bytes) could "
                           f"decode to more than the budget's {self.max_stream_bytes:,} bytes")
        self.bounded_inflate(stream.read_raw_bytes(), len(filters), where, keep=False)

    def bounded_inflate(self, data: bytes, layers: int, where: str,
                        keep: bool = True) -> bytes | None:
        """Inflate *data* through *layers* Flate filters in chunks; refuse past the limit.

        Return the decoded bytes when they are small enough to keep (a page's
        content), else None once the size is known to be within the limit.
        """
        total, kept = 0, []
        for chunk in _inflate(iter([data]), layers):
            total += len(chunk)
            if total > self.max_stream_bytes:
                raise TooLarge(f"input PDF {where} decodes to more than the budget's "
                               f"{self.max_stream_bytes:,} bytes (a decompression bomb?)")
            if keep:
                kept.append(chunk)
        return b"".join(kept) if keep else None

    def check_layout(self, sheet_area_pt2: float, sides: int, placements: int) -> None:
        """Refuse an imposition that would write too many sides or placements."""
        area = sheet_area_pt2 / MM2
        if area > self.max_sheet_area_mm2:
            raise TooLarge(f"the sheet is {area / 1e6:.2f} m2; the budget allows "
                           f"{self.max_sheet_area_mm2 / 1e6:.2f} m2")
        if sides > self.max_sides:
            raise TooLarge(f"the imposition needs {sides:,} sheet sides; the budget allows "
                           f"{self.max_sides:,}")
        if placements > self.max_placements:
            raise TooLarge(f"the imposition places pages {placements:,} times; the budget "
                           f"allows {self.max_placements:,}")


def filter_names(stream: pikepdf.Stream) -> list[str]:
    """Return a stream's filters as names, in decoding order."""
    value = stream.get("/Filter")
    if value is None:
        return []
    items = list(value) if isinstance(value, pikepdf.Array) else [value]
    return [str(f) for f in items]


def _inflate(chunks: Iterator[bytes], layers: int) -> Iterator[bytes]:
    """Yield the decoded data in chunks of at most 1 MB; corrupt data just ends it."""
    for _ in range(layers):
        chunks = _inflate_one(chunks)
    return chunks


def _inflate_one(chunks: Iterator[bytes]) -> Iterator[bytes]:
    decoder = zlib.decompressobj()
    try:
        for data in chunks:
            while True:  # an empty call that yields nothing means the input is used up
                out = decoder.decompress(data, _CHUNK)
                data = decoder.unconsumed_tail
                if out:
                    yield out
                if decoder.eof or (not out and not data):
                    break
            if decoder.eof:
                return
    except zlib.error:  # corrupt data: a renderer stops there too
        return
