"""Make the slug line's font: DejaVu Sans Mono cut down to printable ASCII (13 KB).

Usage: python scripts/make_slug_font.py [DejaVuSansMono.ttf]

The engine embeds it in every plate with a slug (PDF/A and PDF/X want every
font embedded). The source is the copy matplotlib ships; its licence travels
with it in imposer/engine/fonts/LICENSE_DEJAVU. The metrics the engine writes
into the font descriptor (imposer.engine.printmarks.SLUG_METRICS) are printed
here, so a new cut can be checked against them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

OUT = Path(__file__).resolve().parent.parent / "imposer/engine/fonts/DejaVuSansMono-ASCII.ttf"


def main() -> None:
    if len(sys.argv) > 1:
        source = sys.argv[1]
    else:
        import matplotlib

        source = Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSansMono.ttf"
    options = subset.Options()
    options.name_IDs = ["*"]
    options.notdef_outline = True
    options.hinting = False
    options.layout_features = []
    options.drop_tables += ["GSUB", "GPOS", "GDEF", "kern", "FFTM"]
    font = TTFont(source)
    cutter = subset.Subsetter(options)
    cutter.populate(unicodes=range(0x20, 0x7F))
    cutter.subset(font)
    font.save(OUT)
    font = TTFont(OUT)
    head, scale = font["head"], 1000 / font["head"].unitsPerEm
    cmap = font.getBestCmap()
    advances = {font["hmtx"][cmap[c]][0] for c in range(0x20, 0x7F)}
    print(f"{OUT}: {OUT.stat().st_size} bytes; advance {[a * scale for a in advances]}, "
          f"bbox {[round(v * scale) for v in (head.xMin, head.yMin, head.xMax, head.yMax)]}, "
          f"ascent {round(font['hhea'].ascent * scale)}, descent "
          f"{round(font['hhea'].descent * scale)}, cap height "
          f"{round(font['glyf']['H'].yMax * scale)}")


if __name__ == "__main__":
    main()
