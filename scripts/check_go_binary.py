"""Check that a Go binary was built from the pinned module: its build information (what `go
version -m` prints, read here without Go) names MODULE at VERSION with the go.sum hash SUM,
built with -trimpath and CGO_ENABLED=0.  The Dockerfile runs it on helm and kustomize, built
in the image or given (tests/image/build.sh); the hash is the module's in sum.golang.org,
which `go install` checked when it downloaded it.

    python check_go_binary.py BINARY MODULE VERSION SUM
"""

from __future__ import annotations

import sys

MAGIC = b"\xff Go buildinf:"
INLINE_STRINGS = 0x2  # Go >= 1.18: the version and module strings follow the header


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def build_info(data: bytes) -> tuple[str, list[str]]:
    """(Go version, the lines of the module information) of a Go binary's bytes."""
    start = data.find(MAGIC)
    if start < 0 or not data[start + 15] & INLINE_STRINGS:
        raise ValueError("no Go build information (not a Go >= 1.18 binary)")
    length, at = _uvarint(data, start + 32)
    version = data[at:at + length].decode()
    length, at = _uvarint(data, at + length)
    info = data[at:at + length]
    return version, info[16:-16].decode().splitlines() if len(info) > 32 else []


def main(binary: str, module: str, version: str, checksum: str) -> int:
    with open(binary, "rb") as handle:
        go, lines = build_info(handle.read())
    want = {f"mod\t{module}\t{version}\t{checksum}", "build\t-trimpath=true", "build\tCGO_ENABLED=0"}
    missing = sorted(want - set(lines))
    if missing:
        print(f"{binary}: not built as pinned: missing {missing}; has {[l for l in lines if not l.startswith('dep')]}",
              file=sys.stderr)
        return 1
    print(f"{binary}: {module} {version} {checksum}, {go}, -trimpath, CGO_ENABLED=0")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
