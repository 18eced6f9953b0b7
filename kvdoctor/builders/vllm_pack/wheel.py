"""What the pack builder reads of one vLLM wheel (or unpacked tree) without running it: its Python files, the
compiled extensions it ships, its Requires-Dist pins, and the Triton its torch pin brings.
"""
from __future__ import annotations

import email.parser
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

TORCH_PINS = Path(__file__).resolve().parent / "torch_triton.json"
# Hard GPU-kernel dependencies of the CUDA wheel that cannot be imported here; modelled as present (import name).
# (torchvision/torchaudio/torchcodec are not stubbed: transformers reads their metadata.)
MODELLED_PACKAGES = {
    "flashinfer-python": "flashinfer",
    "flashinfer-cubin": "flashinfer_cubin",
    "apache-tvm-ffi": "tvm_ffi",
    "tilelang": "tilelang",
    "nvidia-cutlass-dsl": "cutlass",
    "quack-kernels": "quack",
    "tokenspeed-mla": "tokenspeed_mla",
    "humming-kernels": "humming",
    "deep-gemm": "deep_gemm",
    "xformers": "xformers",
}


def find_wheel(wheels: Path, version: str) -> Path | None:
    """The vllm-`version` wheel in `wheels` (vllm-0.20.1-1-cp38-...: a build tag may follow the version)."""
    for path in sorted(wheels.glob(f"vllm-{version}-*.whl")):
        rest = path.name[len(f"vllm-{version}-"):]
        if rest.startswith("cp") or re.match(r"\d+-cp", rest):
            return path
    return None


def requirements(metadata_text: str) -> list[tuple[str, str, str]]:
    """(normalised name, specifier, marker) of the wheel's unconditional Requires-Dist lines."""
    msg = email.parser.Parser().parsestr(metadata_text)
    out = []
    for line in msg.get_all("Requires-Dist") or []:
        spec, _, marker = line.partition(";")
        if "extra ==" in marker:
            continue
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)", spec)
        if m:
            name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
            out.append((name, m.group(3).strip().strip("()"), marker.strip()))
    return out


def extract_tree(tree: Path, into: Path) -> dict:
    """An unpacked vLLM (a tree or site-packages holding vllm/): its Python files copied under `into`."""
    import shutil

    py = sorted(tree.glob("vllm/**/*.py"))
    for path in py:
        target = into / path.relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    compiled = sorted({str(p.relative_to(tree)).split(".")[0].replace("/", ".") for p in tree.glob("vllm/**/*.so*")})
    metadata = next(iter(sorted(tree.glob("vllm-*.dist-info/METADATA"))), None)
    return {"compiled_modules": compiled, "requirements": requirements(metadata.read_text()) if metadata else [],
            "py_files": len(py)}


def extract(wheel: Path, into: Path) -> dict:
    """The wheel's Python files and metadata under `into`; what it ships compiled, and its requirements."""
    if wheel.is_dir():
        return extract_tree(wheel, into)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        py = [n for n in names if n.startswith("vllm/") and n.endswith(".py")]
        for name in py:
            zf.extract(name, into)
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(meta_name).decode()
    compiled = sorted({n.split(".")[0].replace("/", ".") for n in names
                       if n.startswith("vllm/") and (n.endswith(".so") or ".so." in n)})
    return {"compiled_modules": compiled, "requirements": requirements(metadata), "py_files": len(py)}



def triton_of_torch(torch_spec: str | None) -> dict | None:
    """The Triton version torch pins (torch's own Requires-Dist), from the committed table or, for a torch the
    table lacks, from the package index's metadata (`pip install --dry-run --report`, no download)."""
    if not torch_spec or not torch_spec.startswith("=="):
        return None
    torch_version = torch_spec[2:]
    table = json.loads(TORCH_PINS.read_text()) if TORCH_PINS.exists() else {}
    if torch_version not in table:
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "report.json"
            proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                                   "--ignore-installed", "-q", "--report", str(report), f"torch=={torch_version}"],
                                  capture_output=True, text=True, timeout=300,
                                  # the index's own torch (a local CPU build has no Triton pin)
                                  env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""})
            if proc.returncode != 0 or not report.exists():
                return None
            requires = json.loads(report.read_text())["install"][0]["metadata"].get("requires_dist", [])
        pins = [r.split(";")[0].strip() for r in requires if r.startswith("triton") and "Linux" in r]
        # older torch METADATA writes the specifier in parentheses: "triton (==3.1.0)"
        table[torch_version] = pins[0].replace("triton", "", 1).strip().strip("()").strip() if pins else None
        try:
            TORCH_PINS.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        except OSError:  # an installed kvdoctor may be read-only: the answer still serves this build
            pass
    spec = table.get(torch_version)
    return {"spec": spec, "torch": torch_version, "where": f"torch=={torch_version} METADATA (Requires-Dist)"} \
        if spec else None


def stub_versions(pins: dict[str, str]) -> dict[str, str]:
    """Import name -> version of each modelled package the wheel pins (the child serves stand-ins for them)."""
    return {module: pins[dist].lstrip("=<>!~ ").split(",")[0] or "0"
            for dist, module in MODELLED_PACKAGES.items() if dist in pins}
