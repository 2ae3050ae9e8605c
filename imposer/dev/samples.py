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


DL = (99 * MM, 210 * MM)
#: Background colours (CMYK) of sample artwork, one per kind of print.
COLOURS = {"booklet": (0.75, 0.35, 0.0, 0.1), "cards": (0.0, 0.6, 0.9, 0.0),
           "flyer": (0.15, 0.0, 0.75, 0.05), "zine": (0.55, 0.7, 0.0, 0.0)}


def _text(text: str) -> str:
    return text.replace("\\\\", "\\\\\\\\").replace("(", "\\\\(").replace(")", "\\\\)")


def artwork(path: Path, pages: int, width: float, height: float, *, title: str,
            kind: str = "booklet", bleed: float = 3 * MM) -> Path:
    """Write print-ready artwork: colour to the bleed edge, a safe area, title and folio.

    Each page's MediaBox is its trim grown by *bleed*, with TrimBox and
    BleedBox set as a prepress tool expects, so imposed plates show crop
    marks at the trim and colour running out to the bleed.
    """
    c, m, y, k = COLOURS.get(kind, COLOURS["booklet"])
    pdf = pikepdf.new()
    font = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica,
        Encoding=pikepdf.Name.WinAnsiEncoding))
    full_w, full_h = width + 2 * bleed, height + 2 * bleed
    safe = 6 * MM
    big = max(7.0, min(28.0, width / 9))
    for n in range(1, pages + 1):
        shade = 0.5 + 0.5 * (n % 2)
        ops = [
            f"{c * shade:.3f} {m:.3f} {y:.3f} {k:.3f} k 0 0 {full_w:.3f} {full_h:.3f} re f",
            f"0 0 0 0 k {bleed + safe:.3f} {bleed + safe:.3f} {width - 2 * safe:.3f} "
            f"{height - 2 * safe:.3f} re f",
            f"{c:.3f} {m:.3f} {y:.3f} {k:.3f} K 0.8 w {bleed + safe:.3f} {bleed + safe:.3f} "
            f"{width - 2 * safe:.3f} {height - 2 * safe:.3f} re S",
            f"BT /F1 {big:.1f} Tf 0 0 0 1 k {bleed + 2 * safe:.2f} "
            f"{bleed + height - 2 * safe - big:.2f} Td ({_text(title)}) Tj ET",
            f"BT /F1 {big * 0.6:.1f} Tf 0 0 0 0.8 k {bleed + 2 * safe:.2f} "
            f"{bleed + 2 * safe:.2f} Td (page {n} of {pages}) Tj ET",
        ]
        page = pikepdf.Dictionary(
            Type=pikepdf.Name.Page, MediaBox=[0, 0, full_w, full_h],
            TrimBox=[bleed, bleed, bleed + width, bleed + height],
            BleedBox=[0, 0, full_w, full_h],
            Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font)),
            Contents=pdf.make_stream("\n".join(ops).encode()))
        pdf.pages.append(pikepdf.Page(page))
    pdf.save(path)
    return path
