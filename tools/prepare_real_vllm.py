"""Prepare real vLLM releases for start-ups on the GPU machine (outside the repo; nothing here is committed).

    python tools/prepare_real_vllm.py 0.25.1 0.34.0 [--stage /work/gpu-stage] [--pieces .gpu-carry/startups]
        [--piece-mib 58]
    python tools/prepare_real_vllm.py 0.26.0 --raw --bundle b --after .gpu-carry/startups/manifest.json \
        --pieces .gpu-carry/startups-b          # a later bundle: ships only what the first did not

1. Dependencies: for each release, vLLM's own Requires-Dist (no extras, markers evaluated for Linux x86-64 and
   CPython 3.12), minus what the machine already has or cannot use (torch*, triton, nvidia-*, the FlashInfer
   cubin and CUTLASS DSL wheels, what gpu_verify/startups/machine_packages.txt lists), resolved by pip for the
   machine's platform (`pip install --dry-run --report`) and downloaded once (`pip download --no-deps`); a wheel
   two releases share is shipped once.
2. Each vLLM wheel is repacked whole, every member, as a tar.xz (xz -3: the wheel's deflate leaves the CUDA
   libraries about a third larger); on the machine every member is checked against the wheel's RECORD sha256.
3. Everything is laid end to end in one bundle, in release order (a release's dependencies just before it), and
   cut into pieces that each fit one command's 64 MiB carry; manifest.json says which bytes are which file,
   with each file's sha256. gpu_verify/startups/receive.py puts them together on the machine.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEELS = Path(os.environ.get("KVDOCTOR_VLLM_WHEELS", Path.home() / ".cache" / "kvdoctor" / "wheels"))
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux_2_34_x86_64", "manylinux_2_35_x86_64", "manylinux_2_31_x86_64",
             "manylinux1_x86_64")
# Never shipped: the machine has torch/Triton (the release's pin is recorded beside each result), the CUDA
# libraries come with its torch, and the FlashInfer cubins, CUTLASS DSL and the optional kernel packages
# (TileLang, quack, tokenspeed, humming, the video codec) are large and imported lazily by code paths this grid
# does not take; a start-up that needs one anyway fails with ModuleNotFoundError, recorded as such.
NEVER = re.compile(r"^(torch|torchaudio|torchvision|torchcodec|triton|nvidia-.*|flashinfer-cubin|flashinfer-jit-cache|"
                   r"cuda-.*|cupy-.*|tilelang|pynvvideocodec|quack-kernels|tokenspeed-.*|humming-kernels|"
                   r"fastsafetensors|z3-solver|instanttensor)$")


# A pin the index no longer serves, replaced by the nearest release that it does (recorded in the manifest).
SUBSTITUTE = {"flashinfer-python==0.7.3": "flashinfer-python==0.7.4"}
# One version for every release whose range allows it, so the wheel travels once (xgrammar is ~48 MB).
PREFER = {"xgrammar": "0.2.8"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def machine_packages() -> set[str]:
    path = REPO / "gpu_verify" / "startups" / "machine_packages.txt"
    return {norm(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def wheel_of(version: str) -> Path:
    found = sorted(WHEELS.glob(f"vllm-{version}-*.whl"))
    if not found:
        sys.exit(f"prepare_real_vllm: error: no vllm-{version}-*.whl in {WHEELS} (pip download --no-deps vllm=={version})")
    return found[0]


def requirements(wheel: Path, version: str, prefer: bool = True) -> list[str]:
    """vLLM's own requirements for the machine, minus what it has or must not get."""
    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
    meta = zipfile.ZipFile(wheel).read(f"vllm-{version}.dist-info/METADATA").decode()
    have = machine_packages()
    out = []
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = norm(req.name)
        if NEVER.match(name) or name in have:
            continue
        req.marker = None
        if str(req) in SUBSTITUTE:
            req = Requirement(SUBSTITUTE[str(req)])
        if prefer and name in PREFER and req.specifier.contains(PREFER[name]):
            req.specifier = type(req.specifier)(f"=={PREFER[name]}")
        out.append(str(req))
    return out


def resolve(reqs: list[str], report: Path) -> list[dict]:
    """pip's resolution for the machine's platform; returns the wheels to ship (name, version, url, sha256)."""
    asked = report.with_suffix(".requirements")
    if report.exists() and asked.exists() and asked.read_text() == "\n".join(reqs):
        return picked_from(report)  # resolved before for exactly these requirements
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
           str(report), "--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    proc = subprocess.run(cmd + reqs, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        errors = [line for line in proc.stderr.splitlines() if not line.startswith("WARNING: Location")]
        print("\n".join(errors[-6:]), file=sys.stderr)
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    asked.write_text("\n".join(reqs))
    return picked_from(report)


def picked_from(report: Path) -> list[dict]:
    have = machine_packages()
    picked = []
    for item in json.loads(report.read_text())["install"]:
        name = norm(item["metadata"]["name"])
        if NEVER.match(name) or name in have:
            continue
        info = item["download_info"]
        picked.append({"name": name, "version": item["metadata"]["version"], "url": info["url"],
                       "sha256": info.get("archive_info", {}).get("hashes", {}).get("sha256")})
    return picked


def download(picked: list[dict], dest: Path) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    files = []
    missing = []
    for p in picked:
        fname = p["url"].rsplit("/", 1)[-1].split("#")[0]
        files.append(fname)
        if not (dest / fname).exists():
            missing.append(f"{p['name']}=={p['version']}")
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest),
               "--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"]
        for plat in PLATFORMS:
            cmd += ["--platform", plat]
        subprocess.run(cmd + missing, check=True)
    for fname, p in zip(files, picked):
        if not (dest / fname).exists():
            sys.exit(f"prepare_real_vllm: error: pip did not produce {fname}")
        if p["sha256"] and sha256(dest / fname) != p["sha256"]:
            sys.exit(f"prepare_real_vllm: error: {fname} does not match the index's sha256")
    return files


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def repack(wheel: Path, out: Path) -> None:
    """Every member of the wheel into a tar.xz (xz -3 through the xz program, two threads)."""
    if out.exists():
        return
    tmp = out.with_suffix(".part")
    with open(tmp, "wb") as f:
        xz = subprocess.Popen(["nice", "-n", "10", "xz", "-3", "-T2", "-c"], stdin=subprocess.PIPE, stdout=f)
        with tarfile.open(fileobj=xz.stdin, mode="w|") as tar, zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                if info.is_dir():
                    continue
                data = z.read(info)
                ti = tarfile.TarInfo(info.filename)
                ti.size = len(data)
                ti.mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
                ti.mtime = 0
                tar.addfile(ti, io.BytesIO(data))
        xz.stdin.close()
        if xz.wait() != 0:
            sys.exit("prepare_real_vllm: error: xz failed")
    tmp.rename(out)


def record_count(wheel: Path, version: str) -> int:
    rows = csv.reader(zipfile.ZipFile(wheel).read(f"vllm-{version}.dist-info/RECORD").decode().splitlines())
    return sum(1 for r in rows if len(r) >= 2 and r[1])


class Bundle:
    """Files laid end to end and cut into pieces as they come; pieces already cut never change (append-only)."""

    def __init__(self, folder: Path, piece_bytes: int):
        self.folder, self.piece_bytes = folder, piece_bytes
        self.files: list[dict] = []
        self.paths: list[Path] = []
        self.total = 0
        self.pieces: list[dict] = []
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("piece-*"):
            old.unlink()

    def add(self, name: str, path: Path) -> None:
        if any(f["name"] == name for f in self.files):
            return
        size = path.stat().st_size
        self.files.append({"name": name, "offset": self.total, "size": size, "sha256": sha256(path)})
        self.total += size
        self.paths.append(path)

    def cut(self, final: bool = False) -> None:
        """Write every piece that is now full (and, at the end, the last partial one)."""
        start = len(self.pieces) * self.piece_bytes
        while self.total - start >= self.piece_bytes or (final and self.total > start):
            end = min(start + self.piece_bytes, self.total)
            name = f"piece-{len(self.pieces):02d}"
            with open(self.folder / name, "wb") as out:
                for entry, path in zip(self.files, self.paths):
                    lo, hi = max(start, entry["offset"]), min(end, entry["offset"] + entry["size"])
                    if lo >= hi:
                        continue
                    with open(path, "rb") as f:
                        f.seek(lo - entry["offset"])
                        out.write(f.read(hi - lo))
            self.pieces.append({"name": name, "size": end - start, "sha256": sha256(self.folder / name)})
            start = end

    def manifest(self, releases: list[dict]) -> None:
        doc = {"bundle": getattr(self, "name", "a"), "piece_bytes": self.piece_bytes, "total_bytes": self.total, "files": self.files,
               "pieces": self.pieces, "releases": releases}
        (self.folder / "manifest.json").write_text(json.dumps(doc, indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("versions", nargs="+", help="vLLM releases, most important first")
    ap.add_argument("--stage", type=Path, default=Path("/work/gpu-stage"))
    ap.add_argument("--pieces", type=Path, default=REPO / ".gpu-carry" / "startups")
    ap.add_argument("--piece-mib", type=float, default=58.0)
    ap.add_argument("--bundle", default="a", help="name of this bundle (a second one can follow a first)")
    ap.add_argument("--after", type=Path, help="an earlier bundle's manifest.json: its files are not shipped again")
    ap.add_argument("--raw", action="store_true", help="ship the vLLM wheels as they are (no xz repack: faster here)")
    args = ap.parse_args(argv)
    shipped = {f["name"] for f in json.loads(args.after.read_text())["files"]} if args.after else set()

    args.stage.mkdir(parents=True, exist_ok=True)  # pip's --report writes into it
    deps_dir = args.stage / "deps"
    plans = []
    for v in args.versions:  # all resolutions first: the bundle's order must be fixed before any piece is cut
        wheel = wheel_of(v)
        reqs = requirements(wheel, v)
        try:
            picked = resolve(reqs, args.stage / f"report-{v}.json")
        except subprocess.CalledProcessError:  # the preferred version conflicts with this release's pins
            reqs = requirements(wheel, v, prefer=False)
            picked = resolve(reqs, args.stage / f"report-{v}.json")
        files = download(picked, deps_dir)
        plans.append((v, wheel, reqs, files))
        print(f"{v}: {len(files)} dependency wheels", flush=True)

    bundle = Bundle(args.pieces, int(args.piece_mib * 2**20))
    bundle.name = args.bundle
    releases = []
    for v, wheel, reqs, files in plans:
        t0 = time.time()
        for fname in files:
            if f"deps/{fname}" not in shipped:
                bundle.add(f"deps/{fname}", deps_dir / fname)
        if args.raw:
            tarxz = wheel
        else:
            tarxz = args.stage / f"vllm-{v}.tar.xz"
            repack(wheel, tarxz)
        bundle.add(tarxz.name, tarxz)
        releases.append({"version": v, "wheel": wheel.name, "wheel_sha256": sha256(wheel),
                         "wheel_bytes": wheel.stat().st_size, "tar": tarxz.name, "record_entries": record_count(wheel, v),
                         "requirements": reqs, "deps": [f"deps/{f}" for f in files]})
        final = v == args.versions[-1]
        bundle.cut(final=final)
        bundle.manifest(releases)
        last = max(e["offset"] + e["size"] for e in bundle.files)
        print(f"{v}: tar.xz {tarxz.stat().st_size / 2**20:.1f} MiB (wheel {wheel.stat().st_size / 2**20:.1f} MiB), "
              f"{time.time() - t0:.0f} s; complete with piece-{(last - 1) // bundle.piece_bytes:02d}; "
              f"{len(bundle.pieces)} pieces cut", flush=True)
    print(f"{len(bundle.pieces)} pieces, {bundle.total / 2**20:.1f} MiB in {args.pieces}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
