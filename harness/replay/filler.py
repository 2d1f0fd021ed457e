"""Bodies made up for HAR entries saved without one: a valid empty body of the recorded size and type.

A HAR saved without bodies (Firefox's "Response bodies are not included",
WebPageTest's size-0 contents) still says each response's type and size.
`archive import --fill-missing-bodies` replays such an entry with a body that
the browser accepts as what it asked for and that costs the bytes the
original did: an empty document, stylesheet or script padded with spaces, a
1x1 GIF or an empty SVG padded after its end, "null" for JSON; anything else
(fonts, media) zeros, which a browser rejects as it would a broken file.
The page is then not the original (no text, no layout, no later requests):
the archive and every visit of it say its bodies were filled.
"""

from __future__ import annotations

#: The smallest valid GIF (1x1, one colour); browsers ignore bytes after its trailer.
GIF = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"/>'
#: Types whose empty body is whitespace: the browser parses an empty document, stylesheet or script.
TEXT_TYPES = ("text/", "javascript", "ecmascript", "css", "html", "xml")


def filled_body(mime_type: str, size: int) -> bytes:
    """A valid empty body of ``mime_type`` with ``size`` bytes (more only where no valid body is that small)."""
    kind = mime_type.split(";")[0].strip().lower()
    if kind == "image/svg+xml":
        return _pad(SVG, size, b" ")
    if kind.startswith("image/"):
        return _pad(GIF, size, b"\0")
    if "json" in kind:
        return _pad(b"null", size, b" ")
    if any(t in kind for t in TEXT_TYPES):
        return b" " * max(0, size)
    return b"\0" * max(0, size)


def _pad(body: bytes, size: int, byte: bytes) -> bytes:
    return body + byte * max(0, size - len(body))
