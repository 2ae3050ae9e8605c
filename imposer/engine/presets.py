"""Find a layout by preset name, file or inline data.

Presets ship as package data (``presets/*.json``), so wherever a layout is
asked for, a name such as ``a5-booklet-a4`` works as well as a spec file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from imposer.engine.fields import MAX_TEXT, decode_json
from imposer.engine.layout import Layout
from imposer.engine.spec import parse_layout
from imposer.engine.units import brief
from imposer.errors import LayoutError


def _preset_dir():
    return resources.files("imposer.engine").joinpath("presets")


def preset_names() -> list[str]:
    """Return the names of the built-in presets, sorted."""
    return sorted(p.name[:-5] for p in _preset_dir().iterdir() if p.name.endswith(".json"))


def list_presets() -> list[Layout]:
    """Return every built-in preset, sorted by name."""
    return [load_layout(name) for name in preset_names()]


def load_layout(source: Any) -> Layout:
    """Return the Layout named by *source*: a preset name, a JSON file path or a dict.

    A str is a preset name unless it contains '/' or ends in '.json'; a dict
    is an inline spec, or ``{"preset": NAME}`` to name a preset.
    """
    if isinstance(source, Layout):
        return source
    if isinstance(source, dict):
        if set(source) == {"preset"} and isinstance(source["preset"], str):
            return _load_preset(source["preset"])
        return parse_layout(source)
    if isinstance(source, str) and "/" not in source and not source.endswith(".json"):
        return _load_preset(source)
    if isinstance(source, str) and len(source) > 4096:
        raise LayoutError("a layout file path is at most 4096 characters")
    if isinstance(source, (str, Path)):
        return _load_file(Path(source))
    raise LayoutError(f"a layout is a preset name, a file path or an object, "
                      f"not {type(source).__name__}")


def _load_preset(name: str) -> Layout:
    names = preset_names()
    if name not in names:
        raise LayoutError(f"unknown layout preset {brief(name)}; presets: {', '.join(names)}")
    text = _preset_dir().joinpath(f"{name}.json").read_text(encoding="utf-8")
    return parse_layout(decode_json(text, f"preset {name}"), name=name)


def _load_file(path: Path) -> Layout:
    try:
        if path.exists() and not path.is_file():  # a FIFO's open would wait for a writer
            raise LayoutError(f"layout file {str(path)!r} is not a regular file")
        with open(path, "rb") as stream:  # bounded: a layout "file" may be /dev/zero
            data = stream.read(MAX_TEXT + 1)
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise LayoutError(f"layout file {str(path)!r} not found") from None
    except (OSError, ValueError) as exc:  # ValueError: undecodable, or a NUL in the path
        raise LayoutError(f"layout file {str(path)!r} cannot be read: {exc}") from None
    return parse_layout(decode_json(text, repr(str(path))))
