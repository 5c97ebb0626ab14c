"""The floor of the render benchmarks: an app's files loaded and dumped with PyYAML's C loader
and dumper, the least any renderer must do. Imported for the in-process figures, or run as a
process for the process ones (it imports nothing but PyYAML):

    python tests/bench/yamlfloor.py APP_DIR      # the YAML stream on stdout
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import yaml


def libyaml_floor(app: Path, stream: TextIO | None = None) -> str | None:
    """libyaml load + dump of every ``*.yaml`` of ``app``: into ``stream``, else returned."""
    docs = []
    for path in sorted(app.glob("*.yaml")):
        docs.extend(yaml.load_all(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader))
    return yaml.dump_all(docs, stream, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False)


if __name__ == "__main__":
    libyaml_floor(Path(sys.argv[1]), sys.stdout)
