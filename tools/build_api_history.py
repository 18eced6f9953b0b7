"""Build kvdoctor/data/api_history.json.gz with the releases between the wheels at hand read by HTTP range
requests (kvdoctor/builders/api_history; its --help gives the options):

    .venv/bin/python tools/build_api_history.py [--wheels DIR] [--out FILE] [--no-network]

The builders sit below kvdoctor/dryrun and do not import it; this script hands the builder dryrun's range reader
(the package index pip is configured with, the wheel's central directory, one member at a time).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvdoctor.base.versions import wheel_version  # noqa: E402
from kvdoctor.builders.api_history.build import main  # noqa: E402
from kvdoctor.dryrun import package_index, wheel_fetch  # noqa: E402


class RangeWheel:
    """One release's wheel on the index, read by range requests (its central directory once)."""

    def __init__(self, version: str) -> None:
        location, why_not = package_index.find_wheel(version)
        if location is None:
            raise OSError(f"vLLM {version}: {why_not}")
        self.reader = wheel_fetch.RangeReader(location.url)
        self.entries = wheel_fetch._central_directory(self.reader)  # the range reader's own parts, reused

    def names(self) -> list[str]:
        return list(self.entries)

    def read(self, name: str) -> bytes:
        return wheel_fetch._member(self.reader, name, self.entries[name])


def index_versions(project: str = "vllm") -> list[str]:
    """Every final release the first configured index lists a wheel for."""
    settings = package_index.read_pip_settings()
    versions = set()
    for filename, _, _ in package_index._index_files(settings.index_urls[0], project, settings.cert):
        version = wheel_version(filename, project) if filename.endswith(".whl") else None
        if version and not re.search(r"(a|b|rc|dev)\d*$", version):
            versions.add(version)
    return sorted(versions)


if __name__ == "__main__":
    main(open_wheel=RangeWheel, index_versions=index_versions)
