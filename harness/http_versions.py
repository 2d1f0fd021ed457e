"""Every HAR writer's spelling of an HTTP version ("h2", "HTTP/2.0", "http/2+quic/46", ...), read as one.

The browsers' own HARs, Firefox's recorder, Chromium's net log and other tools' files spell versions each
their own way; the replay's import (harness/replay/har_import.py) and a visit's record of today's web
(harness/https_use.py) read them here.
"""

from __future__ import annotations

import re

#: Version strings by what they begin with, after lower-casing: every writer's spelling of each version.
VERSIONS = [
    (re.compile(r"^(h3|http/3|quic|http/2\+quic)"), "HTTP/3"),
    (re.compile(r"^(h2|http/2|spdy)"), "HTTP/2.0"),
    (re.compile(r"^http/1\.1$"), "HTTP/1.1"),
    (re.compile(r"^http/1(\.0)?$"), "HTTP/1.0"),
    (re.compile(r"^http/0\.9$"), "HTTP/1.0"),
]
#: Version strings that say nothing (a cached entry, a tool that did not know).
UNKNOWN_VERSIONS = {"", "unknown", "-"}
#: The versions as ALPN names them (RFC 9114, RFC 9113), as a visit's record counts requests.
ALPN = {"HTTP/3": "h3", "HTTP/2.0": "h2", "HTTP/1.1": "http/1.1", "HTTP/1.0": "http/1.0"}


def canonical_version(spelled: object) -> str | None:
    """ "HTTP/3", "HTTP/2.0", "HTTP/1.1" or "HTTP/1.0" for any writer's spelling; None for one that says nothing.
    ValueError for a spelling of no HTTP version."""
    text = str(spelled or "").strip().lower()
    if text in UNKNOWN_VERSIONS:
        return None
    for pattern, version in VERSIONS:
        if pattern.match(text):
            return version
    raise ValueError(f"HTTP version {spelled!r} is unknown")
