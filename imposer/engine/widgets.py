"""Appearance streams for form fields (widgets) that carry none: border, background, mark.

A field gets its border and background from /MK and /BS and, for a check box
or radio button, its mark drawn as a path (the ZapfDingbats character /MK /CA
names, by shape); a text or choice field gets an empty ``/Tx BMC EMC`` section
that qpdf fills with the value when it flattens (see document.flatten_annotations).
"""

from __future__ import annotations

import pikepdf
from pikepdf import Name

from imposer.engine.drawing import border_of, colour, ellipse, form_xobject, path, rect_of
from imposer.engine.marks import num
from imposer.engine.source import inherited

#: Field flags of a button field: radio button, push button.
RADIO, PUSH = 1 << 15, 1 << 16


def widget(pdf, annot, form) -> bool | None:
    """Build a form field's border and background, with a check box's or radio's mark."""
    rect = rect_of(annot)
    if rect is None:
        return None
    w, h = rect[2] - rect[0], rect[3] - rect[1]
    mk = annot.get("/MK")
    mk = mk if isinstance(mk, pikepdf.Dictionary) else pikepdf.Dictionary()
    frame = _frame(annot, mk, w, h)
    kind, flags = inherited(annot, "/FT"), inherited(annot, "/Ff")
    flags = int(flags) if isinstance(flags, int) else 0
    if kind in (Name.Tx, Name.Ch):
        # qpdf writes the value between these markers (see document.flatten_annotations)
        resources = pikepdf.Dictionary()
        fonts = form.get("/DR", {}).get("/Font") if isinstance(form.get("/DR"),
                                                                pikepdf.Dictionary) else None
        if isinstance(fonts, pikepdf.Dictionary):
            resources.Font = fonts
        annot.AP = pikepdf.Dictionary(N=form_xobject(pdf, frame + ["/Tx BMC EMC"],
                                                     (0, 0, w, h), resources))
        return False
    if kind == Name.Btn and not flags & PUSH:
        on = _on_state(annot)
        mark = _check(mk, w, h, radio=bool(flags & RADIO))
        states = pikepdf.Dictionary(Off=form_xobject(pdf, frame, (0, 0, w, h)))
        states[on] = form_xobject(pdf, frame + mark, (0, 0, w, h))
        annot.AP = pikepdf.Dictionary(N=states)
        if not isinstance(annot.get("/AS"), Name):
            value = inherited(annot, "/V")
            annot.AS = Name(on) if value == Name(on) else Name.Off
        return False
    if not frame:
        return None
    annot.AP = pikepdf.Dictionary(N=form_xobject(pdf, frame, (0, 0, w, h)))
    return False


def _frame(annot: pikepdf.Dictionary, mk: pikepdf.Dictionary, w: float, h: float) -> list[str]:
    """Return the operators of a widget's background (/MK /BG) and border (/MK /BC, /BS)."""
    ops = []
    fill = colour(mk.get("/BG"), stroke=False)
    if fill:
        ops.append(f"{fill} 0 0 {num(w)} {num(h)} re f")
    stroke = colour(mk.get("/BC"), stroke=True)
    width, dash = border_of(annot)
    if stroke and width:
        bs = annot.get("/BS")
        style = bs.get("/S") if isinstance(bs, pikepdf.Dictionary) else None
        half = width / 2
        if style == Name.U:
            ops.append(f"{stroke} {num(width)} w 0 {num(half)} m {num(w)} {num(half)} l S")
        else:
            ops.append(f"{stroke} {num(width)} w {dash} {num(half)} {num(half)} "
                       f"{num(w - width)} {num(h - width)} re S")
    return ops


def _on_state(annot: pikepdf.Dictionary) -> str:
    """Return the name of a button's on state: its /AS or value if not Off, else /Yes."""
    for value in (annot.get("/AS"), inherited(annot, "/V")):
        if isinstance(value, Name) and value != Name.Off:
            return str(value)
    return "/Yes"


def _check(mk: pikepdf.Dictionary, w: float, h: float, radio: bool) -> list[str]:
    """Draw the button's mark as a path: the ZapfDingbats character /MK /CA names, by shape."""
    caption = str(mk.get("/CA", "l" if radio else "4"))[:1]
    # the field's text colour, else black
    fill = colour(mk.get("/TC"), stroke=False) or "0 g"
    stroke = colour(mk.get("/TC"), stroke=True) or "0 G"
    s, cx, cy = min(w, h) * 0.6, w / 2, h / 2
    if caption == "l":  # a dot
        return [fill, ellipse(cx - s / 3, cy - s / 3, cx + s / 3, cy + s / 3) + " f"]
    if caption == "n":  # a square
        return [fill, f"{num(cx - s / 3)} {num(cy - s / 3)} {num(2 * s / 3)} "
                      f"{num(2 * s / 3)} re f"]
    if caption == "8":  # a cross
        lines = [[(cx - s / 2, cy - s / 2), (cx + s / 2, cy + s / 2)],
                 [(cx - s / 2, cy + s / 2), (cx + s / 2, cy - s / 2)]]
    else:  # a tick, for "4" and anything else
        lines = [[(cx - s / 2, cy), (cx - s / 6, cy - s / 2), (cx + s / 2, cy + s / 2)]]
    return [stroke, f"{num(s / 6)} w 1 J 1 j"] + [path(line) + " S" for line in lines]
