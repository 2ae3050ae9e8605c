"""Sample artwork: real PDFs whose pages print their own number.

Used by `imposer demo` and by the tests, so nobody needs artwork to try imposer.
"""

from __future__ import annotations

from pathlib import Path

import pikepdf

MM = 72 / 25.4
A4 = (210 * MM, 297 * MM)
A5 = (148 * MM, 210 * MM)
CARD = (85 * MM, 55 * MM)


def numbered_pdf(path: Path, pages: int, width: float = A4[0], height: float = A4[1],
                 trim_inset: float = 0.0) -> Path:
    """Write *pages* pages, each showing "Page N" in Helvetica, to *path*.

    With *trim_inset* > 0 the MediaBox is larger than the TrimBox by that much
    on every side (artwork delivered with bleed).
    """
    pdf = pikepdf.new()
    font = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica))
    size = max(8, min(24, width / 10))
    for n in range(1, pages + 1):
        x, y = trim_inset + width * 0.1, trim_inset + height / 2
        content = (f"0.9 0.9 0.95 rg 0 0 {width + 2 * trim_inset:.3f} "
                   f"{height + 2 * trim_inset:.3f} re f 0 0 0 rg "
                   f"BT /F1 {size:.1f} Tf {x:.2f} {y:.2f} Td (Page {n}) Tj ET").encode()
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page,
            MediaBox=[0, 0, width + 2 * trim_inset, height + 2 * trim_inset],
            Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font)),
            Contents=pdf.make_stream(content),
        )
        if trim_inset:
            page.TrimBox = [trim_inset, trim_inset, width + trim_inset, height + trim_inset]
        pdf.pages.append(pikepdf.Page(page))
    pdf.save(path)
    return path
