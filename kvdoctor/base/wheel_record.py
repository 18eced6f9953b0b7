"""A wheel's RECORD file read as its files' sha256 digests (PEP 376/427: `path,sha256=<urlsafe base64>,size`)."""

from __future__ import annotations

import base64


def record_hashes(text: str) -> dict[str, str]:
    """path -> hex sha256 from a wheel's RECORD."""
    hashes = {}
    for line in text.splitlines():
        path, _, rest = line.partition(",")
        digest = rest.partition(",")[0]
        if digest.startswith("sha256="):
            b64 = digest[len("sha256=") :]
            hashes[path] = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
    return hashes
