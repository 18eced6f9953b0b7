"""A native crash (a segfault, an abort, an uncaught C++ exception) and the innermost frame its stack dump names.

A process that dies in C or C++ code prints no Python exception of its own; what follows the crash line is a stack
dump in one of a few shapes (glog / absl `@ 0xADDR FUNC`, PyTorch's `frame #N: FUNC + 0xOFF (0xADDR in LIB)`,
gdb's `#N 0xADDR in FUNC () from LIB`, a demangled signature `FUNC(ARGS)`, Python's faulthandler `File "F", line N
in FUNC`). The innermost frame that is not the signal handler, libc or the interpreter says where it crashed, and its
library says whose code that is (NCCL, the CUDA driver, a kernel library, PyTorch).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from kvdoctor.explain.log_lines import LogLine

CRASH = re.compile(r"Fatal Python error: (?:Segmentation fault|Aborted|Bus error|Floating point exception|Illegal "
                   r"instruction)|Segfault encountered|\*\*\* SIG[A-Z]+\b.{0,40}received\b|\*\*\* Aborted at\b"
                   r"|\bSegmentation fault\b|^Aborted \(core dumped\)|\bterminate called after throwing\b"
                   r"|Caught signal \d+ \(|Abort was called at \d+ line in file")
_CRASH_WORDS = ("Fatal Python error", "Segfault", "*** SIG", "*** Aborted", "Segmentation fault", "Aborted (core",
                "terminate called", "Caught signal", "Abort was called")  # a log without any: CRASH is not run
MAX_DUMP_LINES = 60
MAX_DUMP_ABOVE = 20  # an excerpt that starts inside the dump: its frames stand above the crash line
_FRAMES = (
    re.compile(r"@\s+0x[0-9a-fA-F]+\s+(?:\d+\s+)?\(unknown\)\s+(?P<fn>[A-Za-z_][\w:~]*)\("),  # absl: PC and symbol
    re.compile(r"@\s+0x[0-9a-fA-F.]+\s+(?:\d+\s+)?(?P<fn>[A-Za-z_][\w:<>~,* ]*?)(?:\s+\((?P<lib>[^)\s]+)[^)]*\))?\s*$"),
    re.compile(r"frame #\d+: (?P<fn>.+?)(?: \+ 0x[0-9a-f]+)? \(0x[0-9a-f]+ in (?P<lib>\S+?)\)"),
    re.compile(r"#\d+\s+0x[0-9a-fA-F]+ in (?P<fn>[^\s(]+) \(.*?\)(?: from (?P<lib>\S+)| at (?P<src>\S+))?"),
    re.compile(r'File "(?P<lib>[^"]+)", line \d+,? in (?P<fn>[\w<>.]+)'),
    # 'Abort was called at N line in file:' and the source file on the next line
    re.compile(r"^\s*(?P<lib>(?:\.\./|/)?[\w./-]+/(?P<fn>\w+\.(?:h|hpp|c|cc|cpp|cu|cuh)))\s*$"),
    re.compile(r"^\s*(?P<fn>(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\((?:[\w:<>&*, ]*(?:&|\*|::)[\w:<>&*, ]*)?\)\s*$"),
)
# frames of the crash's machinery, not of the code that crashed
_MACHINERY = re.compile(r"^(?:\(unknown\)|<unknown function>|__restore_rt|raise|abort|gsignal|__GI_|_?_?libc|"
                        r"__pthread|pthread_|start_thread|clone|_start|__libc_start|PyEval|_PyEval|_PyFunction|"
                        r"_PyObject|PyObject_|_Py|Py_|PyRun_|method_vectorcall|cfunction_|faulthandler|c10::Error|"
                        r"c10::detail::|c10::(?:get_)?backtrace|c10::cuda::c10_cuda_check|__cxa_|std::terminate|"
                        r"__gnu_cxx|\?\?)")
_LIBRARIES = (  # (name pattern, whose code)
    (re.compile(r"(?i)nccl"), "NCCL"),
    (re.compile(r"libcuda\.|\bcu[A-Z]\w+"), "the CUDA driver"),
    (re.compile(r"libcudart|\bcuda[A-Z]\w+"), "the CUDA runtime"),
    (re.compile(r"(?i)cublas|cudnn|cusparse|cufft|curand|cusolver"), "a CUDA math library"),
    (re.compile(r"(?i)ck_tile|aiter|rocm|hip[A-Z_]|libamdhip"), "ROCm / AMD's kernel libraries"),
    (re.compile(r"(?i)flashinfer"), "FlashInfer"),
    (re.compile(r"(?i)flash_attn|flash_fwd|flash::"), "flash-attention"),
    (re.compile(r"(?i)triton"), "Triton"),
    (re.compile(r"(?i)vllm|_C\.abi3|_moe_C"), "vLLM's compiled kernels"),
    (re.compile(r"(?i)libtorch|libc10|\bat::|\bc10::|torch"), "PyTorch"),
    (re.compile(r"(?i)gloo"), "Gloo"),
    (re.compile(r"(?i)libvgpu|hami"), "HAMi's vGPU layer (libvgpu)"),
    (re.compile(r"(?:^|/)neo/|level_zero|libze_"), "Intel's GPU compute runtime (NEO / Level Zero)"),
    (re.compile(r"(?i)ucx|libibverbs|mlx5"), "the RDMA stack (UCX / verbs)"),
)


def native_crash_facts(text: str, lines: Iterable[LogLine]) -> dict[str, Any]:
    """log.native_frame ('ncclCommInitRank') and log.native_library ('NCCL') of the first crash whose dump names one."""
    if not any(word in text for word in _CRASH_WORDS):
        return {}
    lines = list(lines)
    for index, line in enumerate(lines):
        if not CRASH.search(line.text):
            continue
        dump = lines[index + 1:index + 1 + MAX_DUMP_LINES]
        frame = _innermost(dump) or _innermost(_frames_above(lines, index))
        if frame is not None:
            function, library = frame
            out: dict[str, Any] = {"log.native_frame": function}
            if library and library.endswith(".py"):  # faulthandler: the Python frame whose native call crashed
                owner = f"a native call from {_python_package(library)}'s Python code"
            else:
                owner = _owner(f"{library or ''} {function}") or _owner(" ".join(line.text for line in dump[:8]))
            if owner:
                out["log.native_library"] = owner
            return out
    return {}


def _frames_above(lines: list[LogLine], index: int) -> list[LogLine]:
    """The frame lines right above a crash line, innermost first as the dump printed them."""
    start = index
    while start > 0 and index - start < MAX_DUMP_ABOVE and any(p.search(lines[start - 1].text) for p in _FRAMES):
        start -= 1
    return lines[start:index]


def _innermost(dump: list[LogLine]) -> tuple[str, str | None] | None:
    """(function, library) of the first frame of a dump that is not the crash's machinery."""
    for line in dump:
        for pattern in _FRAMES:
            found = pattern.search(line.text)
            if found is None:
                continue
            function = " ".join(found.group("fn").split())
            if _MACHINERY.match(function):
                break
            groups = found.groupdict()
            return function[:120], groups.get("lib") or groups.get("src")
    return None


def _python_package(path: str) -> str:
    """'vllm' for .../site-packages/vllm/v1/engine/core.py; the file's name outside an installed package."""
    found = re.search(r"(?:site|dist)-packages/([\w.-]+)/", path)
    return found.group(1) if found else path.rsplit("/", 1)[-1]


def _owner(text: str) -> str | None:
    return next((owner for pattern, owner in _LIBRARIES if pattern.search(text)), None)
