"""On the GPU machine: keep the carried pieces, put files together, install the releases that are complete.

    python -m gpu_verify.startups.receive --pieces .gpu-carry/startups --stage /tmp/kvd-stage [--install]

Pieces come one or two a command (tools/prepare_real_vllm.py cut them); each is checked against the
manifest's sha256 and kept under STAGE/pieces while the machine is held. A file whose bytes have all arrived
is written out and checked against its sha256. With --install, each release whose tar.xz and dependency
wheels are all there goes into STAGE/site-VERSION: the wheels by `pip install --no-index --no-deps --target`,
then every member of the vLLM wheel, each checked against the wheel's own RECORD sha256. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pieces_dir(stage: Path, manifest: dict) -> Path:
    return stage / f"pieces-{manifest.get('bundle', 'a')}"


def take_pieces(carried: Path, stage: Path, manifest: dict) -> list[str]:
    """Copy the carried pieces whose sha256 matches into STAGE/pieces; returns the names taken now."""
    held = pieces_dir(stage, manifest)
    held.mkdir(parents=True, exist_ok=True)
    taken = []
    for piece in manifest["pieces"]:
        src, dst = carried / piece["name"], held / piece["name"]
        if dst.exists() or not src.exists():
            continue
        if src.stat().st_size != piece["size"] or sha256_file(src) != piece["sha256"]:
            raise SystemExit(f"receive: error: {piece['name']} does not match the manifest")
        shutil.copyfile(src, dst)
        taken.append(piece["name"])
    return taken


def assemble(stage: Path, manifest: dict) -> list[str]:
    """Write out every file whose bytes are all in STAGE/pieces; returns the names of the complete files."""
    size = manifest["piece_bytes"]
    held = pieces_dir(stage, manifest)
    have = {p.name for p in held.iterdir()}
    complete = []
    for entry in manifest["files"]:
        out = stage / "files" / entry["name"]
        if out.exists():
            complete.append(entry["name"])
            continue
        first, last = entry["offset"] // size, (entry["offset"] + entry["size"] - 1) // size
        if not all(f"piece-{i:02d}" in have for i in range(first, last + 1)):
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".part")
        with open(tmp, "wb") as f:
            pos, end = entry["offset"], entry["offset"] + entry["size"]
            while pos < end:
                i = pos // size
                with open(held / f"piece-{i:02d}", "rb") as p:
                    p.seek(pos - i * size)
                    chunk = p.read(min(end, (i + 1) * size) - pos)
                f.write(chunk)
                pos += len(chunk)
        if sha256_file(tmp) != entry["sha256"]:
            tmp.unlink()
            raise SystemExit(f"receive: error: {entry['name']} does not match its sha256 after assembly")
        tmp.rename(out)
        complete.append(entry["name"])
    return complete


def verify_record(site: Path, version: str) -> tuple[int, list[str]]:
    """Every RECORD entry of the vLLM wheel present in SITE with the recorded sha256."""
    record = site / f"vllm-{version}.dist-info" / "RECORD"
    checked, bad = 0, []
    for row in csv.reader(record.read_text().splitlines()):
        if len(row) < 2 or not row[1].startswith("sha256=") or row[0].startswith("../"):
            continue  # ../ entries are console scripts pip rewrote outside the package (bin/vllm)
        path = site / row[0]
        want = row[1].split("=", 1)[1]
        got = base64.urlsafe_b64encode(bytes.fromhex(sha256_file(path))).rstrip(b"=").decode() if path.exists() else None
        checked += 1
        if got != want:
            bad.append(row[0])
    return checked, bad


def install(stage: Path, release: dict) -> dict:
    version, site = release["version"], stage / f"site-{release['version']}"
    done = site / ".kvd-installed.json"
    if done.exists():
        return json.loads(done.read_text())
    t0 = time.time()
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    wheels = [str(stage / "files" / d) for d in release["deps"]]
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--disable-pip-version-check", "--target", str(site), *wheels], check=True)
    if release["tar"].endswith(".whl"):  # shipped as the wheel itself
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--disable-pip-version-check", "--target", str(site),
                        str(stage / "files" / release["tar"])], check=True)
    else:
        with tarfile.open(stage / "files" / release["tar"], "r:xz") as tar:
            tar.extractall(site, filter="data")
    checked, bad = verify_record(site, version)
    info = {"version": version, "site": str(site), "dependency_wheels": len(wheels), "record_checked": checked,
            "record_mismatches": bad[:20], "seconds": round(time.time() - t0, 1),
            "wheel_sha256": release["wheel_sha256"]}
    if bad:
        raise SystemExit(f"receive: error: vLLM {version}: {len(bad)} members differ from RECORD: {bad[:5]}")
    done.write_text(json.dumps(info))
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pieces", type=Path, required=True, help="the carried folder with manifest.json")
    ap.add_argument("--stage", type=Path, default=Path("/tmp/kvd-stage"))
    ap.add_argument("--install", action="store_true", help="install every release that is complete")
    args = ap.parse_args(argv)
    manifest = json.loads((args.pieces / "manifest.json").read_text())
    args.stage.mkdir(parents=True, exist_ok=True)
    taken = take_pieces(args.pieces, args.stage, manifest)
    complete = set(assemble(args.stage, manifest))
    # A file an earlier bundle brought (checked when it was assembled) counts as here.
    complete |= {str(p.relative_to(args.stage / "files")) for p in (args.stage / "files").rglob("*") if p.is_file()
                 and not p.name.endswith(".part")} if (args.stage / "files").exists() else set()
    releases = {}
    for release in manifest["releases"]:
        ready = release["tar"] in complete and all(d in complete for d in release["deps"])
        if ready and args.install:
            releases[release["version"]] = install(args.stage, release)
        else:
            releases[release["version"]] = "complete" if ready else "incomplete"
    have = sorted(p.name for p in pieces_dir(args.stage, manifest).iterdir())
    print(json.dumps({"taken": taken, "pieces_held": have, "releases": releases}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
