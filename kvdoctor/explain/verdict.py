"""The exit contract of `kvdoctor explain`: a log that shows any failure exits 1; it exits 0 only when it shows none.

Failure evidence is any of: an exception line (in a traceback, bare, or recovered from a wrapper's quoted payload),
an ERROR or CRITICAL record, a wrapper line, a compiler's or CUDA's error line, a "failed to start" line, a line
where an error-level rule's signature matched, or a printed line that the message index locates at a `raise` or
an error-level logger call of vLLM, Triton, torch or FlashInfer. `uphold` adds the failure finding when the
diagnosis found none, so no failing log ever reads as healthy.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from kvdoctor.base.literals import any_of
from kvdoctor.explain.log_lines import LogLine, chatter
from kvdoctor.explain.signatures import SignatureMatch
from kvdoctor.explain.tracebacks import (CAUSE, CONTEXT, IGNORED, INSTALLED_PREFIX, PYTHON_OWN, TRACEBACK_START,
                                         WORKER_WRAP, ExceptionChain, LoggedException, continued, continued_parts)
from kvdoctor.model.report import SEVERITY_ORDER, Finding, Report

ERROR_LEVELS = ("ERROR", "CRITICAL")
# A line with no log level is still an error line when it reads like a compiler's, CUDA's or a C++ abort's, or
# the shell's word for a process it lost (a segmentation fault, the kernel's OOM killer: "Killed").
# (a count or rate of none is not: 'Error rate: 0.00%', 'error: none')
ERROR_TEXT = re.compile(r"(?i)^(?:fatal error|error)\b(?!\s*(?:rate|count)?\s*[:=]?\s*(?:0(?:\.0+)?\s*%?|none|n/a|nil)\s*$)[: ]"
                        r"|: (?:fatal )?error: |\bCUDA error\b|^\s*what\(\): "
                        # the CUDA runtime's and driver's error names (cudaGetErrorName, cuGetErrorName) printed alone
                        r"|\bcudaError(?!_t\b)[A-Z][A-Za-z]+\b(?!\s*=)|(?<!supported HW \()\bCUDA_ERROR_[A-Z_]+\b"  # not in NGC's banner
                        r"|^(?:ptxas|nvcc|nvlink|ld|collect2)\b.{0,20}\b(?:error|fatal)\b|\bSegmentation fault\b|\(core dumped\)|^Killed$"
                        r"|^LLVM ERROR: "  # LLVM's fatal error (Triton's MLIR lowering): the process aborts
                        # XLA's (absl) status codes heading a message whose exception type was not pasted (TPU)
                        r"|^(?:RESOURCE_EXHAUSTED|INVALID_ARGUMENT|FAILED_PRECONDITION|INTERNAL|UNIMPLEMENTED|OUT_OF_RANGE"
                        r"|DATA_LOSS|DEADLINE_EXCEEDED|PERMISSION_DENIED): \S"
                        # a C++ compiler's diagnostic without its 'file(line): error:' head (nvcc/EDG)
                        r"|^namespace ['\"][\w:]+['\"] has no member ['\"]\w+['\"]"
                        # pydantic v1's ValidationError line ('  msg (type=value_error)'): vLLM 0.4-0.6's config checks
                        r"|\(type=(?:value|type|assertion)_error[\w.]*(?:; [^()]*)?\)\s*$")
FAILED_TO_START = re.compile(r"(?i)\bfailed to start\b")
# Crash words at any level but DEBUG (a process lost, a request the server failed: an access-log 5xx is logged at
# INFO by uvicorn), each the kind of line a failing log may hold and a healthy start-up never does.
CRASH_TEXT = re.compile(r"(?i)\b(?:died|exited|terminated) unexpectedly\b|\bOOMKilled\b"
                        r"|\bexit(?:ed with)? code:?\s{0,8}(?:[1-9]\d*|-\d+)\b|\bterminate called after throwing\b|\bBus error\b|\bIllegal instruction\b"
                        r'|\bHTTP/\d(?:\.\d)?"\s+5\d\d\b'
                        r"|\b(?:Liveness|Readiness|Startup) probe failed\b|\bBack-off restarting failed container\b"
                        r"|\bCrashLoopBackOff\b|\bnon-zero exit (?:status|code)\b"
                        # kubectl describe's last state, systemd's unit result, the shell's other fatal signals
                        r"|\bReason:\s+(?:Error|ContainerCannotRun|StartError)\b|\bstatus=\d+/FAILURE\b"
                        r"|\bFailed with result '|\bFloating point exception\b|\bAbort trap\b"
                        r"|\bexit status:? ?(?:[1-9]\d*|-\d+)\b"
                        # a compiled extension built against another torch (vllm._C, flash_attn): its ops cannot load
                        r"|\bundefined symbol: \S|\bFailed to import from vllm\._\w+ with ImportError\b"
                        # a request the server refused (a prompt over max_model_len, an image over the encoder cache,
                        # an unknown model name): uvicorn logs it at INFO
                        r'|"POST /v1/\S* HTTP/\d(?:\.\d)?"\s+4(?:00|04|13|22)\b'
                        # a C or CUDA device-side assert, a shell job killed, Kubernetes refusing or evicting the pod
                        r"|\bAssertion [`'].{1,400}['`] failed\b|^\[\d+\]\+?\s+(?:Killed|Aborted|Segmentation fault)\b"
                        r"|\bFailedScheduling\b|\bInsufficient nvidia\.com/gpu\b|\bErrImagePull\b|\bImagePullBackOff\b"
                        r"|\bFailedMount\b|\bThe node was low on resource\b"
                        # vLLM 0.x's scheduler ignoring a request it cannot fit (a warning; the client gets nothing)
                        r"|\bInput prompt \(\d+ tokens\)(?: \+ lookahead slots \(\d+\))? is too long and exceeds\b"
                        # vLLM's own INFO lines of a KV cache that cannot exist (it raises next; a log cut there),
                        # Ray's report of a worker that exited on an error
                        r"|\bAvailable KV cache memory: (?:-\d|0(?:\.0+)? GiB)|# (?:GPU|gpu) blocks: 0\b"
                        r"|\bGPU KV cache size: 0 tokens\b|\bMaximum concurrency for \d+ tokens per request: 0\.\d+x"
                        r"|\bexit type: (?:SYSTEM_ERROR|USER_ERROR|NODE_OUT_OF_MEMORY)\b|\bunexpectedly exits\b"
                        # round 4: zsh's and a job table's reports of a process a signal ended, macOS' 'Killed: 9'
                        r"|^(?:zsh|bash|sh|fish): (?:killed|segmentation fault|bus error|abort|illegal hardware instruction"
                        r"|floating point exception)\b|^\[\d+\]\s*[+-]?\s+\d+ (?:killed|segmentation fault|abort|bus error)\b"
                        r"|^Killed: 9$|\bTrace/breakpoint trap\b|\*\*\* Aborted at \d+ \(unix time\)"
                        r"|\bterminate called (?:without an active exception|recursively)\b"
                        # round 8: libc++'s uncaught C++ exception, glibc's older heap-abort line, CUDA's driver API,
                        # a runtime's or a framework's report of an exception nothing caught, a server never healthy,
                        # a GitHub Actions step's error annotation
                        r"|\bterminating due to uncaught exception\b|^\*\*\* Error in `|\bCUDA driver error\b"
                        r"|\b(?:[Uu]nhandled|[Uu]ncaught) exception\b|\bdid not become (?:healthy|ready)\b(?! yet)|^::error\b|^Task exception was never retrieved$"
                        # torch_npu's report of a failed NPU / HCCL runtime call (Ascend): 'NPU function error:
                        # c10_npu::acl::AclmdlRICaptureBegin(...), error code is 207008'
                        r"|\b[A-Z]{2,6} function error: \S[^\n]{0,300}, error code is \d+"
                        # glibc's heap checks abort the process with one of these lines
                        r"|^(?:free|malloc|realloc|munmap_chunk|malloc_consolidate)\(\): \S|^double free or corruption\b"
                        r"|^corrupted (?:size|double-linked list)\b|^Fatal glibc error: |\bstd::bad_alloc\b"
                        # a client's view of a refused or failed request: the status line, uvicorn's plain-text body
                        r"|^<?\s*HTTP/\d(?:\.\d)? (?:5\d\d|40[04]|41[3]|422)\b|^Internal Server Error$"
                        # the GPU lost (the kernel driver's Xid records), ROCm's and HIP's runtime failures
                        r"|\bNVRM: Xid\b|\bGPU has fallen off the bus\b|\buncorrectable ECC error\b"
                        r"|\bMemory access fault by GPU\b|\bHIP error\b|\bhipError[A-Z]\w+\b|\bMIOpen Error\b|\bHSA_STATUS_ERROR\w*"
                        # a start-up that never completes: Ray cannot place the GPUs, vLLM waits for its placement group,
                        # a health check fails, something timed out waiting
                        r"|\bcannot be scheduled right now\b|\bWaiting for creating a placement group of specs for \d+ seconds?\b"
                        r"|\b[Hh]ealth ?check (?:failed|failure)\b|\bis unhealthy\b|\b[Tt]imed out waiting\b"
                        # torch elastic's failure summary, a multiprocessing child's repr, a process a signal ended
                        r"|\bexitcode\s*[:=]\s*-?(?:[1-9]\d*|SIG[A-Z]+)\b|\bSignal \d+ \(SIG[A-Z]+\) received by PID\b"
                        r"|(?:^|\b(?:was|were|got|been|process|worker) )(?:killed|terminated) (?:by|with) signal\b"
                        # Python's report of a thread or a multiprocessing child that raised (its traceback may be cut)
                        r"|^Exception in thread \S.{0,80}:$|^Process [A-Za-z]\w*-\d+(?::\d+)*:$"
                        # faulthandler's dump (a crash or a hang: dump_traceback_later), py-spy's dump of a hung process
                        r"|^(?:Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):|^Timeout \(\d+:\d\d:\d\d\)!$"
                        r"|^Thread (?:0x[0-9a-fA-F]+|\d+) \((?:idle|active)[^)]*\): \""
                        # nvidia-smi without a GPU, a bare 'Connection refused' a client printed, SystemExit with a code
                        r"|^No devices were found$|^Connection refused$|^SystemExit: [1-9]"
                        # Python's own words for a call its callee refused, quoted without their TypeError (a
                        # framework's 'Server error: 500 - ... AsyncEngineArgs.__init__() got an unexpected keyword
                        # argument'): only ever a raised TypeError's message
                        r"|\b[A-Za-z_][\w.]*\(\)\s+(?:got an unexpected keyword argument|missing \d+ required "
                        r"(?:positional|keyword-only) arguments?:|takes \d+ positional arguments? but \d+ (?:were|was) "
                        r"given) ?'?"
                        # the shells' signal reports in other languages (glibc's strsignal, localised): the segmentation
                        # fault and core-dump words anywhere, kill and abort words as the whole line
                        r"|段错误|核心已转储|Speicherzugriffsfehler|Speicherabzug geschrieben|Erreur de segmentation"
                        r"|Ошибка сегментирования|セグメンテーション違反|Violación de segmento|Falha de segmentação"
                        r"|Errore di segmentazione|세그멘테이션 오류|コアダンプ|сброшен на диск"
                        # a build or a test run that failed: make, CMake, uv / pip's '× ', docker build, pytest
                        r"|^make(?:\[\d+\])?: \*\*\* .{0,300}\bError \d+|^CMake Error\b|^\s*× \S"
                        r"|\breturned a non-zero code\b|\bexit(?:ed)? with status:? ?(?:[1-9]\d*|-\d+)\b|^FAILED \S+::\S"
                        r"|\bcuInit(?:\(\))? (?:failed|returned)\b"
                        # round 5: docker ps' status of a container that stopped on an error, a process a signal
                        # ended in other words, torch's NCCL watchdog (a collective that hung), nvidia-smi losing a GPU
                        r"|\bExited \((?:[1-9]\d*|-\d+)\) |\bexited (?:with|due to|on) signal \d+"
                        r"|\bWatchdog caught collective operation timeout\b|\bSome NCCL operations have failed or timed out\b"
                        # the attention selector's reasons ('TRITON_ATTN: [kv_cache_dtype not supported]'): a log's tail
                        # may keep only them
                        r"|\b[A-Z][A-Z0-9_]{2,}: \[[\w ,.()-]*\bnot supported\b"
                        # asyncio's report of a callback that raised, urllib's HTTPError, pip failing to build or install
                        r"|^Exception in callback \S|\bHTTP Error [45]\d\d: \S"
                        r"|^\s*Building wheel for \S+ \([^)]*\) \.\.\. error$|^note: This error originates from a subprocess"
                        # kubectl get pods: a row whose status is a failure (CrashLoopBackOff, OOMKilled: above)
                        r"|^[a-z0-9][\w.-]*\s+\d+/\d+\s+(?:Init:)?(?:Error|ContainerCannotRun|CreateContainer(?:Config)?Error"
                        r"|RunContainerError|StartError)\s+\d+"
                        # Ray's nodes that cannot reach the head's GCS (the cluster never forms)
                        r"|\bFailed to (?:connect to GCS|get cluster ID from GCS)\b|\bTimed out while waiting for GCS\b"
                        r"|\bTimeout at NCCL work: \d+"
                        # torch's epilogue to a CUDA / HIP error (a log cut to its last lines keeps only these),
                        # Ray's autoscaler waiting on a placement group it cannot place, gcc giving up
                        r"|\bCompile with `TORCH_USE_(?:CUDA|HIP)_DSA` to enable device-side assertions"
                        r"|\bDevice-side assertions were explicitly omitted for this error check"
                        r"|\b(?:CUDA|HIP) kernel errors might be asynchronously reported at some other API call"
                        r"|\bFor debugging consider passing (?:CUDA_LAUNCH_BLOCKING|AMD_SERIALIZE_KERNEL)="
                        # round 6: a C++ check macro's failure (glog / torch CHECK_EQ, the kernel libraries' own:
                        # 'Check failed: a == b (1 vs. 6)', 'expert_indices.size(1) == args->top_k (1 vs. 6) : ...')
                        r"|\bCheck failed: \S|\S (?:==|!=|<=|>=|<|>) \S[^\n]{0,200}? \([^()\s]{1,40} vs\. [^()\s]{1,40}\)"
                        r"|\b[1-9]\d*\+? pending placement groups?\b|^compilation terminated\.$"
                        r"|\bUnable to determine the device handle for GPU"
                        # a ModuleNotFoundError's message printed alone (Ray prints a failed import's str this way)
                        r"|^No module named '[\w.]+'\.?$"
                        # a TypeError's message printed alone (a framework that logs str(exc)): a call whose arguments
                        # the callee does not take, Python's own wording
                        # (the argument's name may be on the next line: a hard wrap)
                        r"|^[A-Za-z_][\w.]*\(\) (?:(?:got an unexpected keyword argument"
                        r"|got multiple values for argument)(?: '\w+'|\s*$)"
                        r"|missing \d+ required (?:positional|keyword-only) arguments?:"
                        r"|takes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ (?:were|was) given)"
                        # an error in the reporter's or a wrapper's language (Chinese, Japanese, Korean)
                        # (not negated: '没有报错' / '无异常' / '不会报错' say there was none)
                        r"|(?<!没有)(?<!不会)(?<!任何)(?<![没无未不])(?:报错|错误|失败|异常)|エラー|오류|에러"
                        # kubectl describe's Warning events of a pod that failed, the OOM killer in a report's words
                        r"|^\s*Warning\s{1,8}(?:Failed\w*|BackOff|Unhealthy|Evicted|OOMKill\w*)\s|\bkilled by (?:the )?OOM\b"
                        r"|^(?:已杀死|已放弃|非法指令|总线错误|Getötet|Abgebrochen|Убито|Аварийный останов|強制終了|Processus arrêté"
                        r"|Instruction illégale|Abortado|Morto)(?:\s*\(.{1,40}\))?$")
_CRASH_WORDS = ("unexpected keyword argument", "required keyword-only", "positional argument",
                "xpectedly", "OOMKilled", "ode ", "terminate called", "Bus error", "llegal instruction", '" 5',
                "probe failed", "Back-off restarting", "CrashLoopBackOff", "non-zero exit", "ode:", "Reason:",
                "/FAILURE", "Failed with result", "Floating point", "Abort trap", "xit status",
                "undefined symbol", "Failed to import from vllm", '" 4', "Assertion", "Killed", "Aborted",
                "Segmentation", "FailedScheduling", "Insufficient nvidia", "ErrImagePull", "ImagePullBackOff",
                "FailedMount", "low on resource", "placement group",
                "y: -", "y: 0", "size: 0 tokens", "request: 0.", "Input prompt (", "# GPU blocks: 0", "# gpu blocks: 0", "SYSTEM_ERROR", "USER_ERROR", "NODE_OUT_OF")
# The words of the round-4 patterns: other programs' lines (a shell, glibc, the driver, Ray, torch elastic), never a
# vLLM INFO record, so INFO lines skip this scan (a 5 MB log of INFO records pays nothing for it).
_LATE_WORDS = ("Trace/breakpoint", "*** Aborted", "terminate called", "bad_alloc", "NVRM", "off the bus",
                "ECC error", "Memory access fault", "HIP error", "hipError", "MIOpen Error", "HSA_STATUS",
                "be scheduled", "k fail", "unhealthy", "out waiting", "xitcode", "by PID",
                "by signal", "with signal", "by OOM", "by the OOM", "non-zero code", "with status", "cuInit",
                "Speicher", "Erreur de segmentation", "Falha de", "Errore di",  # other non-ASCII words: _crash
                # round 8's: libc++, glibc, CUDA's driver API, exceptions nothing caught, a server never healthy, CI
                "uncaught exception", "*** Error in", "driver error", "ncaught exception", "nhandled exception",
                "not become", "::error", "never retrieved",
                # round 5's: docker ps, signals, torch's NCCL watchdog and CUDA error epilogue, Ray, gcc, nvidia-smi
                "Exited (", "xited with signal", "xited due to signal", "xited on signal", "Watchdog caught",
                "Timeout at NCCL", "_DSA`", "explicitly omitted", "kernel errors might", "For debugging consider",
                "pending placement",
                "compilation terminated", "NCCL operations have failed", "device handle for GPU",
                "Check failed", " vs. ", "GCS", "Error ", "ContainerCannotRun", "ContainerError", "ContainerConfigError",
                "StartError", "not supported", "Exception in callback", "HTTP Error", "... error",
                "error originates")
# The round-4 patterns anchored at a line's start, tested by one anchored match (it fails on the first characters).
_CRASH_HEAD = re.compile(r"(?i)\s*(?:(?:zsh|bash|sh|fish): |make|CMake Error|FAILED |\[\d|Killed: |free|malloc|realloc|munmap|double free|corrupted "
                         r"|Fatal glibc|<?\s*HTTP/|Internal Server|Exception in thread|Process |Thread |Current thread"
                         r"|[A-Za-z_][\w.]*\(\) "
                         r"|Timeout \(|No devices|No module named|Connection refused|SystemExit|Warning |已杀死|已放弃|非法指令|总线错误"
                         r"|Getötet|Abgebrochen|Убито|Аварийный|強制終了|Processus|Instruction illégale|Abortado|Morto)")
# What other logging formats write for an error record (a line vLLM's own header did not claim): Python logging's
# ' - ERROR - ', loguru's '| ERROR |', Ray's '<time>\tERROR file.py:1 --', '[ERROR]', logfmt and JSON levels, glog and
# torch's c10 logger ('E1204 10:22:18.123 ...', '[E ProcessGroupNCCL.cpp:475]'); and the lines a process prints
# as it dies that no level precedes (Python's fatal error, a signal handler's report, torch's segfault handler).
FOREIGN_ERROR = re.compile(
    r"^.{0,80}?(?:\s-\s|\s\|\s|\t|\[)(?:ERROR|FATAL|CRITICAL)(?:\]|\s+-\s|\s+\|\s|\s|:)"
    # '%(name)s %(process)d %(levelname)s %(message)s' and the like: the level after one to three words that
    # read as a logger name, a pid or a time (a dot, digit, colon or slash in each), not after prose; then perhaps
    # a plain logger name ('2024-07-01 07:28:04.488 1 kserve ERROR [...]')
    r"|^(?:\S*[\d._:/]\S*\s+){1,3}(?:[A-Za-z_][\w.-]{0,40}\s+)?(?:ERROR|FATAL|CRITICAL)\s{1,8}\S"
    r"|\b(?:level|lvl|severity)=\"?(?i:error|err|fatal|critical)\b"
    r"|\"(?:level|levelname|severity|log_level|lvl)\":\s*\"(?i:error|err|fatal|critical)\""
    # Python logging's default format ('CRITICAL:root:...'; 'ERROR:' is ERROR_TEXT's), Go's and Rust's panics
    r"|^(?:CRITICAL|FATAL): ?\S|^panic: |\bpanicked at\b"
    # an OpenAI-compatible server's error body, as a client prints it (JSON or a Python dict)
    r"|[\"']object[\"']:\s*[\"']error[\"']"
    # the kernel's OOM killer (dmesg, journal), NCCL's own error records (NCCL logs errors at WARN)
    r"|\bOut of memory: Kill(?:ed)? process\b|\boom-kill:|\bMemory cgroup out of memory\b"
    r"|\bNCCL WARN\b.{0,200}\b(?:[Ff]ailure|failed|[Ee]rror)\b"
    # a communication library's record under its name after its source place: UCX's
    # '[1754890927.298391] [host:270 :0] ib_mlx5dv_md.c:1100 UCX  ERROR mlx5_7: ibv_modify_qp(...) failed'
    r"|\.c(?:pp)?:\d+\s+(?:UCX|UCT|UCS|NIXL|NCCL|RCCL|HCCL|MPI)\s+(?:ERROR|FATAL)\s+\S"
    # a C library's own record under its bracketed name: HAMi-core's '[HAMI-core ERROR (utils.c:160)]: ...'
    r"|^\[[\w.-]{2,40} (?:ERROR|FATAL)\b[^\]\n]{0,80}\]:? \S"
    # glog's and torch c10's 'E0822 16:31:16' ('[E822 16:31:16.131931664 ProcessGroupNCCL.cpp:632]': c10 drops the 0)
    r"|^\[?[EF]\d{3,4} \d\d:\d\d:\d\d|^\[[EF] [\w.]+:\d+\]"
    # Ray's C++ components (raylet, core worker, GCS): '[2024-06-25 16:32:00,123 E 4711 4711] file.cc:1: ...'
    # ('(raylet) [...]': under the component's tag)
    r"|^(?:\([\w.-]+\) )?\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [EC] \d+ \d+\]"
    # torch's C++ exception (c10::Error) as it prints it: its header and its native frames
    r"|^Exception raised from \S+ at \S+:\d+ \(most recent call first\):|^frame #\d+: .{0,80}\bc10::Error\b"
    # the CUDA libraries' own status words (cuBLAS, cuDNN, ...) and cuBLAS's argument check
    r"|\b(?:CUBLAS|CUDNN|CUSPARSE|CUFFT|CURAND|CUSOLVER)_STATUS_(?!SUCCESS\b)[A-Z_]+\b|\bcuDNN error: \S"
    r"|^\s*\*\* On entry to \w+\s+parameter number \d+ had an illegal value"
    # a shell that has no such command (vllm not installed in this environment), ninja's failed build step
    # (the commands that run vLLM: a missing nvidia-smi or ldconfig does not stop it)
    r"|\b(?:vllm|python3?(?:\.\d+)?|pip3?|ray|torchrun|accelerate|uvicorn|trl|swift|llamafactory-cli|xinference\S*)"
    r": (?:command )?not found\b|\bcommand not found: (?:vllm|python3?|pip3?|ray|torchrun)\b|^FAILED: \S"
    # an exception line a Markdown paste wrapped in bold or code marks: **ValueError: ...**, `ValueError: ...`
    r"|^(?:\*\*|`+|__)(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S"
    r"|^Fatal Python error\b|^Aborted(?: \(core dumped\))?$|\*\*\* SIG[A-Z]+ received\b|\bSegfault encountered\b"
    r"|\bNCCL error\b"
    # the container runtime, the NVIDIA driver and the shell saying the process never ran or was killed
    r"|\bError response from daemon\b|^nvidia-container-cli: .*\berror\b|\bFailed to initialize NVML\b"
    r"|\bNVIDIA-SMI has failed\b|: line \d+: +\d+ (?:Killed|Aborted)\b"
    # Ray's words for a worker it lost
    r"|\bdied or was killed\b|\bkilled due to memory pressure\b"
    # a client that could not reach the server, or got an internal error back as JSON
    r"|^curl: \(\d+\) |\"code\":\s*5\d\d\b|^\s*\"error\":\s*[\"{]|^\s*\"code\":\s*4\d\d,?\s*$"
    # an error body as a Python client prints the response (a dict repr: single quotes), a non-empty one
    r"|[{,]\s*'error':\s*(?:\{|'[^']|\"[^\"])"
    # an exception line behind a prefix no pattern knows ('[worker-3] ValueError: ...', 'host1: KeyError: ...'),
    # one whose case a paste lost ('permissionError: ...'), and a traceback flattened onto one line by a paste
    # ('File "x.py", line 5, in f raise X(...) requests.exceptions.ConnectionError: ...')
    r"|^(?:\S{1,60}\s+){1,2}(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S|^[a-z]\w*(?:Error|Exception): \S"
    # one a program quoted after its own words or inside a printed value ('rollout worker 3: ValueError: ...',
    # "errors: ['ValueError: ...']")
    r"|(?::\s|[\[(]['\"]|^['\"])(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S"
    # the lines only a traceback or an exception's report holds: Python's chaining markers, pydantic's validation
    # footer, Triton's ptxas repro line (a log cut after the exception keeps these)
    r"|^During handling of the above exception, another exception occurred:$"
    r"|^The above exception was the direct cause of the following exception:$"
    r"|^\s*For further information visit https://errors\.pydantic\.dev/\S+/v/\w+|^Repro command: \S*ptxas\b"
    # an exception as its repr, the way a logger or a wrapper prints it: RuntimeError('Engine loop has died')
    r"|^(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\((?:'|\"|\)\s*$)"

    r"|^File \"[^\"]{1,300}\", line \d+, in \S+ .{0,3000}?\b(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S"
    # an exception whose class is not named ...Error: one from a package's errors / exceptions module
    # ('zmq.error.Again: ...', 'triton.runtime.errors.OutOfResources: ...'), a timeout or failure class
    # ('httpx.ReadTimeout: timed out', 'torch._dynamo.exc.BackendCompilerFailed: ...')
    r"|^(?:[a-z_]\w*\.)*(?:errors?|exceptions?|exc)\.[A-Z]\w*: \S|^(?:[a-z_]\w*\.)+[A-Z]\w*(?:Timeout|Failed|Failure): \S"
    # pydantic's validation error lines (vLLM's config classes), an OSError's '[Errno 13]'
    # a bare 'Exception: ...', other servers' lower-case error records (nginx's '[error]', '[crit]')
    r"|^Exception: \S|\[(?:error|fatal|crit|critical|emerg|alert|Error|Fatal|Critical)\]"
    r"|^\s*(?:Value error|Assertion failed), \S|\b\d+ validation errors? for [A-Z]\w*|\[(?i:errno|error) \d+\] \S")
_FOREIGN_WORDS = ("ERROR", "FATAL", "CRITICAL", "level", "Aborted", "SIG", "Segfault", "NCCL error", "rror ",
                  "nvidia-container-cli", "NVML", "NVIDIA-SMI", "Killed", "killed", "curl: (", '"code"',
                  "Error: ", "Exception: ", "Error(", "Exception(", "raised from", "frame #", "_STATUS_",
                  "cuDNN error", "On entry to", "not found", "FAILED: ", "During handling", "above exception",
                  "errors.pydantic", "Repro command", "lvl", "severity", "panic", "object", "Out of memory", "oom-kill",
                  "out of memory", "NCCL WARN", "File \"", '"error"', "alue error, ", "ssertion failed, ", "validation error",
                  "rrno ", "rror ", "rror.", "rrors.", "xception.", "xceptions.", "exc.", "Timeout: ", "Failed: ",
                  "Failure: ", "xception: ", "'error':", "[error]", "[Error]", "[fatal]", "[Fatal]", "[crit", "[Crit", "[emerg]",
                  "[alert]")
_GLOG_HEAD = re.compile(r"^\[?[EF](?:\d{3,4} | [\w.]+:\d+\])|^(?:\([\w.-]+\) )?\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [EC] \d")


# TensorFlow / JAX print these glog errors at import in healthy processes (a second registration of a CUDA plugin)
_IMPORT_NOISE = re.compile(r"Unable to register cu\w+ factory|already registered\. Please check linkage")


_FOREIGN_PREFILTER = any_of(_FOREIGN_WORDS)
_CRASH_PREFILTER = any_of(_CRASH_WORDS)  # one C-level scan instead of a word loop
_LATE_PREFILTER = any_of(_LATE_WORDS)


def _foreign_error(text: str) -> bool:
    """FOREIGN_ERROR behind a substring test (and not a healthy import's noise, nor an error quoted as an example in
    backticks: vLLM's ulimit warning names "`OSError: [Errno 24] Too many open files`")."""
    if _FOREIGN_PREFILTER.search(text) is None and _GLOG_HEAD.match(text) is None:
        return False
    found = FOREIGN_ERROR.search(text)
    return (found is not None and _IMPORT_NOISE.search(text) is None
            and text.count("`", 0, found.start()) % 2 == 0)


MAX_TRACEBACK_LOOKAHEAD = 400
_TRACEBACK_LEVELS = (None, "WARNING", "WARN")
# an access log's line (uvicorn, vLLM's own): the endpoint and the status answered
_ACCESS = re.compile(r'"(?:POST|GET|PUT|DELETE) (/\S*) HTTP/\d(?:\.\d)?"\s+(\d{3})\b')
# the server saying it is up and listening (uvicorn, vLLM's own), after which a request it refuses with a 4xx status is
# the request's fault, not the server's
_SERVING = re.compile(r"Application startup complete|Uvicorn running on|Starting vLLM API server|Started server process")
# vLLM's ERROR record of the error response it sent a client (serving_*.py: 'Error with model object='error'
# message='...' type='NotFoundError' param=None code=404', an ErrorResponse repr): a 4xx is a refused request
_REFUSED_REQUEST = re.compile(r"\bcode[=:]\s*['\"]?4\d\d\b|\btype='(?:NotFoundError|BadRequestError)'"
                              # serving_engine's _check_model: always a 404 (the record's end may be cut off)
                              r"|message='The model `[^`]+` does not exist\.")
_RESPONSE_RECORD = re.compile(r"object='error'|ErrorResponse\(|\berror_response\b|\bError with model\b")


# Python's warnings.showwarning header: 'path.py:8: RuntimeWarning: message' (a Markdown link around the path too)
_WARNING_HEADER = re.compile(r"\.py(?::\d+)?\)?:\d*:? ?\s*[A-Z]\w*Warning: ")
MAX_WARNING_LINES = 5  # lines a multi-line warning message may continue over, before its indented source line


def _inside_warnings(lines: list[LogLine]) -> set[int]:
    """Indices of lines that continue a Python warning's message (its header line ends in ':' or the message spans
    lines, and its indented source line follows): 'RuntimeWarning: Failed to read commit hash:' then 'No module
    named ...' is a warning's text, not a failure."""
    inside: set[int] = set()
    for index, line in enumerate(lines):
        if "Warning: " not in line.text or not _WARNING_HEADER.search(line.text):
            continue
        following = []
        for j in range(index + 1, min(index + 1 + MAX_WARNING_LINES, len(lines))):
            nxt = lines[j]
            if nxt.stream != line.stream or not nxt.text.strip():
                break
            if nxt.text[:1] in " \t":  # the warning's source line: the message ended before it
                inside.update(following)
                break
            following.append(j)
    return inside


# the server saying it is ready for requests (not 'Started server process', which comes before the app's start-up)
_READY = re.compile(r"Application startup complete|Uvicorn running on|Starting vLLM API server (?:\d+ )?on")


def _ready(text: str) -> bool:
    """_READY behind substring tests (a 100k-line log pays three `in` tests a line, not a regex search)."""
    if "startup complete" not in text and "running on" not in text and "API server" not in text:
        return False
    return _READY.search(text) is not None


# a start-up beginning: after a failure, it is another run (a restart, the user's next attempt), not the same one going on
# (the version line is a run's first; the engine's and the args' lines come after early errors of the same run)
_RUN_START = "vLLM API server version "
# evidence a server never comes up after in the same run: the start-up said it failed, a rule knows the failure
_FATAL_KINDS = ("failed to start", "known failure", "wrapper")


def survived(lines: list[LogLine], evidence: tuple[FailureEvidence, ...]) -> bool:
    """Whether the log's failure evidence all came before the server said it was ready, in the same run: a retry's
    error ('Error retrieving safetensors ..., retrying 1 of 2'), a probe that failed and was worked around, a
    traceback an optional import or a fallback printed. Not when the start-up said it failed or a rule knows the
    failure, nor when a new run starts between the last failure line and the ready line."""
    if not evidence or any(line.kind in _FATAL_KINDS for line in evidence):
        return False
    last = max(line.line for line in evidence)
    ready = ready_after(lines, last)
    return ready is not None and not _run_starts_between(lines, last, ready.number)


def _run_starts_between(lines: list[LogLine], after: int, before: int) -> bool:
    """Whether a new run of vLLM starts between the two line numbers (a restart: not the same run)."""
    return any(after < line.number < before and _RUN_START in line.text for line in lines)


def survived_before(lines: list[LogLine], evidence: tuple[FailureEvidence, ...]) -> tuple[FailureEvidence, ...]:
    """The failure lines the server came up after, in the same run, when later failure lines follow its ready line
    (an error it retried past at start-up, then a request's failure or a kill while serving): not the failure.
    () when none, when a start-up said it failed, or when nothing failed after the ready line."""
    if not evidence or any(line.kind in _FATAL_KINDS for line in evidence):
        return ()
    for ready in reversed([line for line in lines if _ready(line.text)]):
        before = tuple(e for e in evidence if e.line < ready.number)
        if before and len(before) < len(evidence) \
                and not _run_starts_between(lines, max(e.line for e in before), ready.number):
            return before
    return ()


# a shutdown the server was asked for: vLLM's '[shutdown] API server: shutdown triggered' and 'received signal=SIGTERM'
# records (0.2x), uvicorn's 'Shutting down', a signal handler's 'Received SIGTERM'
_SHUTDOWN = re.compile(r"\[shutdown\] |\bShutting down\b|\breceived signal[= ]SIG(?:TERM|INT)\b|\bReceived SIG(?:TERM|INT)\b")


def requested_shutdown(lines: list[LogLine], evidence: tuple[FailureEvidence, ...]) -> LogLine | None:
    """The shutdown request that every failure line came after, when vLLM was up before it: the errors are its
    teardown's (the engine's output handler losing the engine it stopped, EngineDeadError), not a failure. Not when a
    start-up said it failed."""
    if not evidence or any(line.kind == "failed to start" for line in evidence):
        return None
    first = min(line.line for line in evidence)
    up = came_up(lines)
    if up is None or up.number >= first:
        return None
    return next((line for line in lines if up.number < line.number < first and line.level not in ERROR_LEVELS
                 and ("hut" in line.text or "SIG" in line.text) and _SHUTDOWN.search(line.text)), None)


def ready_after(lines: list[LogLine], number: int) -> LogLine | None:
    """The first line after line ``number`` where the server says it is ready for requests."""
    return next((line for line in lines if line.number > number and _ready(line.text)), None)


# lines only a server or engine that is up prints: uvicorn's and vLLM's ready lines, the engine's periodic stats
# (logged by the running engine loop, 'Avg prompt throughput: 0.0 tokens/s' included), an offline LLM.generate's
# progress bar and its engine's 'init engine (profile, create kv cache, warmup model) took 12.3 seconds'
_UP = re.compile(_READY.pattern + r"|Avg prompt throughput: |Processed prompts: |\binit engine \(profile, create kv cache"
                 # the server's routes, listed once its app is built on the engine (launcher.py), a speculative
                 # decoder's periodic acceptance stats, a benchmark's results against the server
                 r"|\bRoute: /\S*, Methods: |Avg Draft acceptance rate: |^Successful requests: +\d|^Median TPOT \(ms\): ")


def came_up(lines: list[LogLine]) -> LogLine | None:
    """The first line that shows the server or engine up: a ready line, its routes, a request answered 2xx, the
    engine's stats."""
    for line in lines:
        if line.level == "DEBUG":
            continue
        if _UP.search(line.text):
            return line
        if "HTTP/" in line.text and (answer := _ACCESS.search(line.text)) and answer.group(2)[0] == "2":
            return line
    return None


def _c10_message(lines: list[LogLine], index: int) -> str | None:
    """torch's C++ errors (c10::Error) print their message, then 'Exception raised from FN at FILE:N (most recent
    call first):' and the C++ frames: the message is the line above, and it is the failure's words."""
    text = lines[index].text
    if not text.startswith("Exception raised from ") or not index:
        return None
    above = lines[index - 1]
    message = above.text.strip()
    if not message or above.stream != lines[index].stream or message.startswith("frame #"):
        return None
    return f"{message} ({text.strip()})"


def _llvm_diagnostic(lines: list[LogLine], index: int, quoted: str) -> str | None:
    """LLVM's fatal error (report_fatal_error) often follows the pass's own diagnostic, printed bare to stderr just
    before it ('Unsupported conversion from f16 to f16' above 'LLVM ERROR: Unsupported rounding mode ...'): the
    diagnostic names what failed, so it is quoted first."""
    if not lines[index].text.startswith("LLVM ERROR: ") or not index:
        return None
    above = lines[index - 1]
    message = above.text.strip()
    if (not message or above.level is not None or above.stream != lines[index].stream or len(message) > 300
            or message.startswith("LLVM ERROR") or _NOT_A_MESSAGE.match(above.text)):
        return None
    return f"{message}; {quoted}"


def refused_request(text: str) -> bool:
    """Whether an ERROR record is the error response a running server sent for one request, with a 4xx status."""
    return _RESPONSE_RECORD.search(text) is not None and _REFUSED_REQUEST.search(text) is not None


def _crash(text: str, level: str | None = None, worded: bool | None = None) -> bool:
    """CRASH_TEXT behind a substring test (a 100k-line log pays for the regex only on lines that may match); the
    round-4 words only on lines that are not INFO records. ``worded``: the substring test's answer, when known."""
    if worded is None:
        worded = _CRASH_PREFILTER.search(text) is not None
    return ((worded or (level != "INFO" and (_CRASH_HEAD.match(text) is not None
                                             or _LATE_PREFILTER.search(text) is not None
                                             or not text.isascii())))  # non-ASCII: the localised signal reports
            and CRASH_TEXT.search(text) is not None)
# an exception line indented in a log that is not (quoted in an event, a report, a nested output): not a traceback's
# own exception line, which parse_chains reads at column 0
_INDENTED_EXCEPTION = re.compile(r"(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")
# an exception a paste or a renderer put in brackets inside a line: '[message](RuntimeError: Error in function ...)'
_BRACKETED_EXCEPTION = re.compile(r"[(\[](?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")
WRAPPED_MIN = 60  # a line at least this long may be the first part of a message a hard wrap split


def _wrapped_crash(lines: list[LogLine], index: int, worded: list[bool]) -> str | None:
    """A crash line split by a hard wrap ('Waiting for creating' / 'a placement group of specs for 150 seconds'),
    joined with the lines that continue it; None when it is not one. Tried only on a record followed by a line of the
    same process without a header (its wrapped rest), or on a long line without a header followed by one."""
    line = lines[index]
    if index + 1 >= len(lines) or lines[index + 1].level is not None or lines[index + 1].stream != line.stream:
        return None
    if line.level is None and len(line.text) < WRAPPED_MIN:
        return None
    if not (worded[index] or worded[index + 1]):
        return None  # no crash word on either line: most wrapped lines
    joined = continued(lines, index)
    return joined if joined is not None and _crash(joined, line.level) else None


FAILING_KINDS = ("raise", "error", "critical")
# Printed lines that are never a raise site's message: frames, carets, progress bars, access logs of other loggers.
# An indented line is asked too (pydantic and pastes indent messages); a traceback's frames and carets are not.
_NOT_A_MESSAGE = re.compile(r'^\s*(?:File "|Traceback|\^|~|INFO:|DEBUG:|WARNING:|\S*\s*\d+%\|)'
                            r"|^\S+:\d+: \w*Warning\b")  # Python's warnings.warn output: a warning, not a raise

# Most convincing first: what the diagnosis falls back to when no rule explains the failure.
KINDS = ("exception", "error level", "error text", "raise site", "failed to start", "known failure",
         "wrapper")


@dataclass(frozen=True)
class FailureEvidence:
    """One line of the log that shows a failure."""

    line: int
    kind: str
    """One of KINDS."""
    text: str
    stream: str = ""
    level: str | None = None


def failure_evidence(
    lines: list[LogLine],
    chains: list[ExceptionChain],
    matches: Iterable[SignatureMatch] = (),
    locate: Callable[[str], object | None] | None = None,
) -> tuple[FailureEvidence, ...]:
    """Every line of the log that shows a failure, in log order (one entry per line, its most convincing kind).

    ``locate(text)`` returns the message-index entry a printed line matches (None when there is none); the
    index is asked only when nothing else shows a failure, since it changes the verdict only then."""
    found: dict[int, FailureEvidence] = {}

    def add(evidence: FailureEvidence) -> None:
        held = found.get(evidence.line)
        if held is None or (held.kind != "wrapper" and (
                evidence.kind == "wrapper" or KINDS.index(evidence.kind) < KINDS.index(held.kind))):
            found[evidence.line] = evidence  # a wrapper line stays one: it points at a failure, it is not it

    for match in matches:
        if match.role == "wrapper":
            add(FailureEvidence(match.line, "wrapper", match.text))
    for chain in chains:
        for exception in chain.exceptions:
            add(FailureEvidence(exception.line, "exception", exception.summary, exception.stream))
    for match in matches:
        if match.role == "wrapper":
            continue
        if SEVERITY_ORDER[match.rule.severity] >= SEVERITY_ORDER["error"]:
            if locate is not None and warning_gone_past(match, lines, locate):
                continue
            add(FailureEvidence(match.line, "known failure", match.text))
    # the crash words' substring test, on every line but the INFO chatter signal_lines leaves out too (a long log's
    # throughput stats and request records, past their call site's first CHATTER_REPEATS lines)
    worded = [not noise and _CRASH_PREFILTER.search(line.text) is not None for line, noise in zip(lines, chatter(lines))]
    in_warning = _inside_warnings(lines) if any("Warning: " in line.text for line in lines) else set()
    served: set[str] = set()  # endpoints that answered a request with success
    excused: set[int] = set()  # lines of a refused request's error record
    serving = False  # the server said it is up
    for index, line in enumerate(lines):
        if index in in_warning:
            continue  # a Python warning's message, printed over several lines
        if "egister" in line.text and _GLOG_HEAD.match(line.text.lstrip()) and _IMPORT_NOISE.search(
                " ".join(continued_parts(lines, index)[:2])):
            continue  # TensorFlow's / JAX's glog noise at import (read with its next line: a wrap may cut it)
        if not serving and ("tart" in line.text or "running on" in line.text) and _SERVING.search(line.text):
            serving = True
        if line.level != "DEBUG" and line.text[:5] != "DEBUG":
            answer = _ACCESS.search(line.text) if "HTTP/" in line.text else None
            if answer is not None and answer.group(2)[0] == "2":
                served.add(answer.group(1))
            if answer is not None and answer.group(2)[0] == "4" and (serving or answer.group(1) in served):
                pass  # a server that is up refused one request: the request's fault, not the server's
            elif _crash(line.text, line.level, worded[index]):
                add(FailureEvidence(line.number, "error text", line.text.strip(), line.stream, line.level))
            elif index + 1 < len(lines) and lines[index + 1].level is None:  # a line a wrap may have split
                crash = _wrapped_crash(lines, index, worded)
                if crash:
                    add(FailureEvidence(line.number, "error text", crash, line.stream, line.level))
        # a traceback (one a logger printed at WARNING too: logger.warning(..., exc_info=True)), not one Python
        # reported and dropped
        if line.level in _TRACEBACK_LEVELS and line.text[:1] in "T " and _traceback_header(lines, index) and not (
                index and lines[index - 1].text.startswith(IGNORED)):
            add(FailureEvidence(line.number, "error text", _cut_traceback(lines, index), line.stream, line.level))
        elif "most recent call last" in line.text and (cut := _ipython_cut(lines, index)):
            add(FailureEvidence(line.number, "error text", cut, line.stream, line.level))
        if line.level in ("INFO", "DEBUG") or line.text[:5] in ("INFO:", "DEBUG"):
            continue  # INFO records and uvicorn's INFO lines
        text = line.text.strip()
        if not text:
            continue
        # an error line is quoted with the lines that continue its message (a wrap, a message holding newlines)
        if line.level in ERROR_LEVELS and serving:
            parts = continued_parts(lines, index)
            if refused_request(" ".join(parts)):  # the error response a running server sent one request
                excused.update(range(index, index + len(parts)))  # its wrapped lines are not messages of their own
                continue
        if line.level in ERROR_LEVELS and line.text.lstrip().startswith('File "') and _opens_frames(lines, index):
            # the frames of a traceback logged without its header (an excerpt that starts inside it): one failure
            add(FailureEvidence(line.number, "error text", f"a traceback cut at both ends{_innermost_frames(lines, index)}",
                                line.stream, line.level))
        if line.level in ERROR_LEVELS and not (line.text[:1] in " \t" and _in_frames(lines, index)):
            # (a traceback's frame, code and caret lines, logged at ERROR line by line, are the traceback's: its
            # header above is the evidence, and a cut one is read as such, not as a message of its own)
            add(FailureEvidence(line.number, "error level", continued(lines, index) or text, line.stream, line.level))
        elif line.level is None and (ERROR_TEXT.search(text) or _foreign_error(text) or (
                line.text[:1] in " \t" and _INDENTED_EXCEPTION.match(text)) or (
                "rror: " in text or "xception: " in text) and _BRACKETED_EXCEPTION.search(text)):
            quoted = _c10_message(lines, index) or _flattened_exception(continued(lines, index) or text)
            add(FailureEvidence(line.number, "error text", _llvm_diagnostic(lines, index, quoted) or quoted,
                                line.stream))
        if ("tart" in text or "TART" in text) and FAILED_TO_START.search(text):
            add(FailureEvidence(line.number, "failed to start", text, line.stream, line.level))
        if "Worker failed with error '" in text and WORKER_WRAP.search(text):
            add(FailureEvidence(line.number, "wrapper", text, line.stream, line.level))
    _hang(lines, add)
    if not found:
        _last_words(lines, add)
    if not found and locate is not None:
        raised: dict[str, bool] = {}
        for index, line in enumerate(lines):
            if index in excused or index in in_warning:
                continue
            if line.level is None and line.text.strip() and not _NOT_A_MESSAGE.match(line.text):
                located = locate(_unquoted(line.text.strip()))
                if located is None:
                    joined = continued(lines, index)  # a message wrapped over lines, located as one
                    located = locate(joined) if joined is not None else None
                    if located is not None and not _opens_on(located, line.text):
                        located = None  # a message that starts on a later line is that line's, not this one's
                if located is not None and (all(loc.kind in FAILING_KINDS for loc in located.locations)
                                            or _condition_holds(located, line.text.strip())):
                    add(FailureEvidence(line.number, "raise site", line.text.strip(), line.stream))
            elif line.level == "WARNING" and line.text.strip() and not line.text.rstrip().endswith(("...", "\u2026")):
                # a WARNING record whose message vLLM only ever raises (an exception a caller caught and logged
                # as a warning): a failure; one that vLLM also logs as a warning somewhere is not (nor one cut
                # short with '...': its lost rest may be a warning's longer wording)
                text = line.text.strip()
                if text not in raised:  # a warning repeated per request is asked once
                    located = locate(text)
                    raised[text] = (located is not None and all(loc.kind in FAILING_KINDS for loc in located.locations)
                                    and _in_release(located))
                if raised[text]:
                    add(FailureEvidence(line.number, "raise site", text, line.stream, line.level))
    return tuple(found[number] for number in sorted(found))


def warning_gone_past(match: SignatureMatch, lines: list[LogLine], locate: Callable[[str], object | None]) -> bool:
    """Whether a rule matched a plain line that the message index places only at vLLM logger calls below ERROR (a
    warning vLLM goes on from: 'CutlassBlockScaledGroupedGemm not supported on the current platform.', in the log's
    release when known) and the server came up after it: no failure."""
    if match.exception is not None or ready_after(lines, match.line) is None:
        return False
    located = locate(match.text)
    return located is not None and bool(located.locations) and all(
        loc.kind not in FAILING_KINDS for loc in located.locations)


def _unquoted(text: str) -> str:
    """A message pasted inside quotes or backticks ('"Speculative decoding is not yet supported on VLLM V1"'), without
    them."""
    if len(text) > 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1].strip()
    return text


def _in_frames(lines: list[LogLine], index: int) -> bool:
    """Whether an indented line is a traceback's: a frame line ('  File "...", line N') itself, or one above it (of
    the same process: another's lines may be interleaved) past nothing but other indented lines, within a few."""
    if lines[index].text.lstrip().startswith('File "'):
        return True
    for earlier in _earlier_in_stream(lines, index):
        if 'File "' in lines[earlier].text:
            return True
        if lines[earlier].text[:1] not in " \t":
            return False
    return False


def _opens_frames(lines: list[LogLine], index: int) -> bool:
    """Whether a frame line is the first of its traceback's the log holds: no header nor frame above it."""
    before = next(_earlier_in_stream(lines, index), None)
    return before is None or not (lines[before].text[:1] in " \t" and _in_frames(lines, before)
                                  or "most recent call last" in lines[before].text)


def _earlier_in_stream(lines: list[LogLine], index: int, within: int = 8):
    """The indices of the lines above ``index`` of the same process, nearest first, among the ``within`` above."""
    stream = lines[index].stream
    return (j for j in range(index - 1, max(-1, index - within - 1), -1) if lines[j].stream == stream)


# IPython's and Jupyter's traceback header names the exception's type before its frames ('RuntimeError     Traceback
# (most recent call last)'); a frame is 'File ~/x.py:64, in f(...)' or Colab's linked '[/x.py](URL) in f(...)', its
# failing line marked '---> 64 code'
_IPYTHON_HEADER = re.compile(r"^\s*((?:[a-z_]\w*\.)*[A-Z]\w*)\s{2,}Traceback \(most recent call last\)")
_IPYTHON_PLACE = re.compile(r"^(?:File )?\[?(?P<file>[^\s\[\]()]+?\.py)(?::\d+)?\]?(?:\([^)\s]*\))?,? in (?P<function>[\w<>.]+)")
_IPYTHON_ARROW = re.compile(r"^-+>\s*\d+\s+(?P<code>\S.*)$")
_NOT_FAILURES = ("KeyboardInterrupt", "SystemExit", "GeneratorExit")
MAX_IPYTHON_CUT = 400


def _ipython_cut(lines: list[LogLine], index: int) -> str | None:
    """An IPython traceback the log cuts before its exception line, as evidence: its header names the exception's
    type, its innermost frame (and the innermost in vLLM) say where; None for another line or a traceback that ends
    in its exception line (the chain parser reads that one)."""
    header = _IPYTHON_HEADER.match(lines[index].text)
    if header is None:
        return None
    kind = header.group(1)
    short = kind.rpartition(".")[2]
    if short in _NOT_FAILURES:
        return None
    frames: list[list[str]] = []  # [place, code]
    for line in lines[index + 1 : index + 1 + MAX_IPYTHON_CUT]:
        text = line.text.strip()
        if text.startswith(short) and text[len(short):][:1] in (":", ""):
            return None  # the exception line is there: not cut
        if (place := _IPYTHON_PLACE.match(text)) is not None:
            file = _PACKAGE_FILE.sub(r"\1", place.group("file"))
            frames.append([f"{file} in {place.group('function')}", ""])
        elif (arrow := _IPYTHON_ARROW.match(text)) is not None and frames and not frames[-1][1]:
            frames[-1][1] = f": `{arrow.group('code').strip()}`"
    if not frames:
        return None
    named = ["".join(frames[-1])]
    in_vllm = next(("".join(f) for f in reversed(frames[:-1]) if f[0].startswith("vllm/")), None)
    if in_vllm and not frames[-1][0].startswith("vllm/"):
        named.append(f"in vLLM: {in_vllm}")
    return f"{kind} (an IPython traceback the log cuts before its message; innermost frame {'; '.join(named)})"


# vLLM's notice that a process waits on another (shm_broadcast.py; INFO in 0.6, WARNING later), printed once per period
# waited: one is a slow step (compilation, a long load), a repeat is a hang.
_SHM_WAIT = re.compile(r"\bNo available shared memory broadcast block found in \d+ seconds?\b")
HANG_REPEATS = 2
# a line reporting that a step finished (the worker's 'Initial profiling/warmup run took 107.62 s', 'Application startup
# complete', a JIT build's '[aiter] finish build [module_moe_asm], cost 44.9s'): after the last wait notice it says the
# wait ended, the notices were a slow step
_STEP_DONE = re.compile(r"\btook \d+(?:\.\d+)? ?(?:s\b|sec|second)|\b(?:[Ss]tartup|[Cc]apturing|[Cc]ompil\w+|[Ww]arm(?:ing)?[- ]?up)"
                        r"\b[^\n]{0,40}\b(?:complete[d]?|finished|done)\b"
                        r"|\b[Ff]inish(?:ed)? (?:build|building|compil\w+)\b|\bcost \d+(?:\.\d+)? ?s(?:ec(?:onds?)?)?\b")


def _hang(lines: list[LogLine], add: Callable[[FailureEvidence], None]) -> None:
    """vLLM's wait notice as evidence of a hang once it repeats (the second notice is the evidence); any other wait
    notice (a process, a request or a resource still waited for) once it repeats at the log's end, nothing after it
    but more of the same."""
    waits = [line for line in lines if "No available shared" in line.text and _SHM_WAIT.search(line.text)]
    if len(waits) >= HANG_REPEATS and not any(
            line.number > waits[-1].number and _STEP_DONE.search(line.text) for line in lines):
        line = waits[HANG_REPEATS - 1]
        add(FailureEvidence(line.number, "error text", f"{line.text.strip()} (printed {len(waits)} times: a hang)",
                            line.stream, line.level))
        return
    _waiting_at_the_end(lines, add)


# A notice that something is still waited for: vLLM's 'Waiting for 1 local, 0 remote core engine proc(s) to start.'
# (v1/utils.py, every 10 s), a request 'is still in WAITING_FOR_REMOTE_KVS state' (v1/core/sched/scheduler.py), Ray's
# and Kubernetes' 'still waiting' / 'waiting for' notices, a 'not ready yet' poll.
_WAIT_NOTICE = re.compile(r"\b(?:[Ww]aiting for\b|WAITING FOR\b|is still (?:in \w+ state|waiting|pending|loading)\b"
                          r"|[Ss]till waiting\b|not ready yet\b)")
_VARYING = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?|[0-9a-f]{8,}(?:-[0-9a-f]{4,})*")
_WAIT_WORDS = ("aiting", "AITING", "still", "ready yet")
MAX_WAIT_WRAPS = 2  # lines a hard wrap may add to one wait notice


def _waiting_at_the_end(lines: list[LogLine], add: Callable[[FailureEvidence], None]) -> None:
    """The log's last lines (after its last line of something else) are one wait notice, repeated: the process it
    came from waited there until the log was cut or the process stopped (a hang), whatever its level. A notice a hard
    wrap split is read with the lines that continue it (no header of their own, the same stream)."""
    by_stream: dict[object, list[LogLine]] = {}
    for line in lines:
        by_stream.setdefault(line.stream, []).append(line)
    for stream in dict.fromkeys(line.stream for line in reversed(lines)):  # each process's own last lines
        if _waited_at_the_end(by_stream[stream], add):
            return


def _waited_at_the_end(lines: list[LogLine], add: Callable[[FailureEvidence], None]) -> bool:
    notices: list[tuple[LogLine, str]] = []
    index = len(lines) - 1
    while index >= 0:
        text = lines[index].text.strip()
        if not text or set(text) <= set(".…"):  # blank lines and a paste's '...' between repeats
            index -= 1
            continue
        found = _wait_notice_ending_at(lines, index)
        if found is None:
            break
        first, joined = found
        notices.append((lines[first], joined))
        index = first - 1
    if len(notices) < HANG_REPEATS:
        return False
    shapes = [_VARYING.sub("#", joined[_WAIT_NOTICE.search(joined).start():]) for _, joined in notices]
    if len(set(shapes)) != 1:
        return False
    # one printing echoed by two handlers ('[aiter] waiting for X' then '[2026-...] INFO file_baton.py:48: waiting for
    # X'): the same notice behind two different heads, one after the other, is one wait, not a repeat
    parts = [(joined[:at], joined[at:]) for _, joined in notices[::-1]
             for at in [_WAIT_NOTICE.search(joined).start()]]  # (head, notice) in log order
    printings, index = 0, 0
    while index < len(parts):
        echo = index + 1 < len(parts) and parts[index + 1][1] == parts[index][1] and parts[index + 1][0] != parts[index][0]
        printings += 1
        index += 2 if echo else 1
    if printings < HANG_REPEATS:
        return False
    line, joined = notices[-1]
    add(FailureEvidence(line.number, "error text", f"{joined} (printed {printings} times at the log's end: it "
                        "waited there, a hang)", line.stream, line.level))
    return True


def _wait_notice_ending_at(lines: list[LogLine], index: int) -> tuple[int, str] | None:
    """(index of its first line, its text) of the wait notice whose last line is ``index``: the line alone, or joined
    with up to MAX_WAIT_WRAPS lines before it that it continues; None when no such notice ends there."""
    last = lines[index]
    for first in range(index, max(-1, index - MAX_WAIT_WRAPS - 1), -1):
        if first < index and (lines[first + 1].level is not None or lines[first].stream != last.stream
                              or lines[first].number + 1 != lines[first + 1].number
                              or not lines[first].text.strip()):
            return None
        joined = " ".join(line.text.strip() for line in lines[first : index + 1])
        if any(word in joined for word in _WAIT_WORDS) and _WAIT_NOTICE.search(joined) is not None:
            return first, joined
    return None


_COMPARISON = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(<=|<|>=|>|==|!=)\s*(-?\d+(?:\.\d+)?)\s*$")
_COMPARE = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq, "!=": operator.ne}
_VALUE_AFTER = re.compile(r"\s*(-?[\w.]+)")


def _condition_holds(located, text: str) -> bool:
    """Whether the log's own values make a raise site's condition true (a message vLLM both logs as a warning and
    raises, 'max_num_scheduled_tokens is set to -1792 ...' under `max_num_scheduled_tokens <= 0`): then the line is
    the raise. Only a plain comparison of numbers once the values are put in is judged. A line whose wording differs
    from the template later on (another release's, a paste's cut) gives each value found right after its literal."""
    from kvdoctor.explain.raise_site import substituted

    for location in located.locations:
        if location.kind not in FAILING_KINDS or not location.condition:
            continue
        values = {name: str(value) for name, value in located.named_values(location).items()}
        if not values:
            values = _values_after_literals(located.template.parts, location.names, text)
        found = _COMPARISON.match(substituted(location.condition, values)) if values else None
        if found and _COMPARE[found.group(2)](float(found.group(1)), float(found.group(3))):
            return True
    return False


def _values_after_literals(parts: tuple, names: tuple, text: str) -> dict[str, str]:
    """Each placeholder's value taken as the word right after the literal before it, where that literal is in the
    line (placeholders are the template's None parts, in the order of ``names``)."""
    values: dict[str, str] = {}
    placeholder = 0
    for index, part in enumerate(parts):
        if part is not None:
            continue
        literal = parts[index - 1] if index else None
        name = names[placeholder] if placeholder < len(names) else None
        placeholder += 1
        at = text.find(literal) if literal else -1
        if name and at >= 0 and (found := _VALUE_AFTER.match(text, at + len(literal))):
            values[name] = found.group(1).rstrip(".,")
    return values


def _in_release(located) -> bool:
    """Whether the log's vLLM release (when it names one) has the raise site: a warning of a release the index did not
    read (0.6, a fork) may be logged where a later release raises the same words."""
    version = getattr(located, "version", None)
    return not version or any(loc.has_release(version) for loc in located.template.locations)


def _opens_on(located, text: str) -> bool:
    """Whether the located template's message begins on this line (its first literal's opening is in it)."""
    first = next((part.strip() for part in located.template.parts if part and part.strip()), "")
    return first[:16] in text


# A traceback's frames without its header or its exception line (a paste cut at both ends, a Windows path too).
_FRAME_LINE = re.compile(r'^\s*(?:File "[^"]{1,400}", line \d+,? in \S|raise (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b)')
# a `raise X(...)` that goes on past its statement (`raise ValueError("...")\\n    if `): code quoted in a prompt or a
# JSON string that a paste wrapped, never a traceback's code line
_RAISE_CUT = re.compile(r"^\s*raise .*\)(?:\\n|\s+(?!from\b)\w)")
_STACK_INFO = "Stack (most recent call last):"  # logging's stack_info=True: frames a healthy record may carry
# A reporter's own words for a start-up that stops: the log holds no error, the line says it hangs or stops there.
_HANG_PROSE = re.compile(r"(?i)\b(?:hangs?|hanging|hung|stuck|freez(?:es|ing)|frozen)\b.{0,40}?"
                         r"\b(?:here|forever|indefinitely|at this|at that|no (?:more |further )?output|never)\b"
                         r"|\bno (?:more|further) (?:output|logs?)\b|\bnothing (?:else )?(?:happens|is printed)\b"
                         # or that the process dies there ('it stops here and the container restarts')
                         r"|\b(?:container|pod|process|server|engine|service|it)\b.{0,30}?\b(?:restarts|keeps restarting"
                         r"|crash(?:es|ed)|dies|died)\b")
_HANG_WORDS = ("ang", "ung", "tuck", "reez", "rozen", "o more", "o further", "othing", "ANG", "TUCK", "restart",
               "crash", "dies", "died")


_FRAME_FILE = re.compile(r'File "(?P<file>[^"]+)"(?:, line (?P<line>\d+), in (?P<function>\S+))?')


def _python_own(frame: str) -> str | None:
    """The library file a frame line is in when it is Python's own ('argparse.py'), else None."""
    found = _FRAME_FILE.search(frame)
    file = found.group("file").replace("\\", "/") if found else ""
    own = PYTHON_OWN.search(file) if not file.startswith("<") else None
    return file[own.end():] if own else None


def _innermost_frame(lines: list[LogLine], frames: list[LogLine]) -> str:
    """': <the innermost frame>', or, when that is Python's own (argparse, asyncio), the innermost frame of the
    program's code with its code line, where the call that failed was written, and the library it called."""
    library = _python_own(frames[-1].text)
    own = [line for line in frames if 'File "' in line.text and _python_own(line.text) is None]
    if library is None or not own:
        return f": {frames[-1].text.strip()}"
    at = next((i for i, line in enumerate(lines) if line.number == own[-1].number), None)
    below = lines[at + 1].text.strip() if at is not None and at + 1 < len(lines) else ""
    code = f": `{below[:120]}`" if below and not below.startswith(("File ", "^", "~")) else ""
    return f" outside Python's standard library: {_short_frame(own[-1].text)}{code} (which called Python's {library})"


def _short_frame(text: str) -> str:
    """'vllm/engine/arg_utils.py:240 in add_cli_args' for a frame line (the path from its package on)."""
    found = _FRAME_FILE.search(text)
    if found is None or found.group("line") is None:
        return text.strip()
    file = INSTALLED_PREFIX.sub("", found.group("file"))
    if file == found.group("file"):
        file = "/".join(file.replace("\\", "/").split("/")[-3:])
    return f"{file}:{found.group('line')} in {found.group('function')}"


def _last_words(lines: list[LogLine], add: Callable[[FailureEvidence], None]) -> None:
    """Evidence for a log that shows no error line at all: traceback frames standing alone (two or more, not
    under logging's 'Stack (most recent call last):'), or a line without a level (the reporter's) saying that the
    process hangs or stops printing there."""
    lines = _outside_ignored(lines)
    frames = [line for line in lines if ('File "' in line.text or "raise " in line.text) and line.level is None
              and _FRAME_LINE.match(line.text) and not _RAISE_CUT.match(line.text)]
    carets = [line for line in lines if line.level is None and "^" in line.text and _CARETS.match(line.text)]
    if frames and (len(frames) >= 2 or frames[0].text.lstrip().startswith("raise ") or carets
                   or _code_under(lines, frames[-1])) and not any(
            line.text.strip() == _STACK_INFO for line in lines):
        add(FailureEvidence(frames[0].number, "error text", "traceback frames without their exception; innermost "
                            f"frame{_innermost_frame(lines, frames)}", frames[0].stream))
    if carets and not frames:  # Python 3.11+ marks the failing expression of each frame: a traceback cut short
        add(FailureEvidence(carets[-1].number, "error text", "a traceback's caret line without its exception (the log "
                            "was cut inside a traceback)", carets[-1].stream))
    for line in lines:
        if line.level is None and any(word in line.text for word in _HANG_WORDS) and _HANG_PROSE.search(line.text):
            add(FailureEvidence(line.number, "error text", line.text.strip(), line.stream))
    stopped = next((line for line in lines if "leaked" in line.text and _STOPPED.search(line.text)), None)
    if stopped is not None and came_up(lines) is None:
        add(FailureEvidence(stopped.number, "error text", "vLLM's process stopped before any line shows it up, and "
                            f"no line says why (killed from outside, or its error went elsewhere): {stopped.text.strip()}",
                            stopped.stream))


# A line that shows the process gone: Python's resource tracker cleaning up after processes that died without
# releasing their shared memory or semaphores (vLLM's workers, killed). Evidence only where no line shows vLLM up: a
# server stopped after serving prints it too. (A container's 'Exited (137)' is a late word already; a shell's bare
# 'Terminated' is a stop someone asked for: not evidence.)
_STOPPED = re.compile(r"resource_tracker: There appear to be \d+ leaked (?:shared_memory|semaphore) objects? to clean up "
                      r"at shutdown")


_CARETS = re.compile(r"^\s+[~^]*\^[~^]*\s*$")


def _code_under(lines: list[LogLine], frame: LogLine) -> bool:
    """Whether a frame line has its code line under it (indented deeper, not another frame): Python's traceback shape."""
    at = next((i for i, line in enumerate(lines) if line is frame), None)
    if at is None or at + 1 >= len(lines):
        return False
    below = lines[at + 1].text
    indent = len(frame.text) - len(frame.text.lstrip())
    return (below[:1] in " \t" and len(below) - len(below.lstrip()) > indent and below.strip()
            and not below.lstrip().startswith('File "'))


def _outside_ignored(lines: list[LogLine]) -> list[LogLine]:
    """The lines less the tracebacks Python reported under 'Exception ignored in' (up to their exception line)."""
    if not any(line.text.startswith(IGNORED) for line in lines):
        return lines
    kept, inside = [], False
    for line in lines:
        if line.text.startswith(IGNORED):
            inside = True
        elif inside and line.text[:1] not in (" ", "\t", "") and line.text.strip() != TRACEBACK_START:
            inside = False  # its exception line ends it
            continue
        if not inside:
            kept.append(line)
    return kept


_FLAT_EXCEPTION = re.compile(r"\b((?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S.*)$")


def _flattened_exception(text: str) -> str:
    """A traceback a paste flattened onto one line ('File "x.py", line 5, in f raise X(e) pkg.XError: ...') stands for
    its exception, from the exception's name on; any other line for itself."""
    if not text.startswith('File "'):
        return text
    found = _FLAT_EXCEPTION.search(text)
    return found.group(1) if found else text


def _traceback_header(lines: list[LogLine], index: int) -> bool:
    """Whether the line is a traceback's header, whole or split by a hard wrap ('Traceback (most' / 'recent call
    last):')."""
    text = lines[index].text.strip()
    if text == TRACEBACK_START:
        return True
    if not text.startswith("Traceback (") or index + 1 >= len(lines):
        return False
    return f"{text} {lines[index + 1].text.strip()}".startswith(TRACEBACK_START)


def _cut_traceback(lines: list[LogLine], index: int) -> str:
    """A traceback's header as evidence: a traceback whose exception line the log has lost (cut short) still shows
    a failure; its innermost frame says where, and the record a logger printed it under says what failed."""
    where = _innermost_frames(lines, index + 1)
    header = lines[index]
    before = lines[index - 1] if index else None
    if (header.level is not None and before is not None and before.level == header.level
            and before.stream == header.stream and before.text.strip() and before.text[:1] not in " \t"):
        return f"{before.text.strip()} ({TRACEBACK_START[:-1]}{where})"  # logger.exception('msg'): msg, then frames
    return f"{TRACEBACK_START} (a traceback{where})"


_PACKAGES = r"(?:vllm|vllm_\w+|torch|triton|flashinfer|transformers)"
_PACKAGE_PATH = re.compile(r'File ".*/(' + _PACKAGES + r'/[^"/]+(?:/[^"/]+)*)"')
_PACKAGE_FILE = re.compile(r"^.*/(" + _PACKAGES + r"/.+)$")
"""A frame's file from its package's folder on (the site-packages or checkout prefix says nothing of the failure)."""


def _innermost_frames(lines: list[LogLine], start: int) -> str:
    """'; innermost frames: FRAME: `code` <- FRAME: `code`' of the traceback lines from ``start`` on: the innermost
    frame says where, the one above it what was being called (a constructor the cut line never names)."""
    frames: list[list[str]] = []  # each frame's line and the code line under it
    stream = lines[start].stream if start < len(lines) else None
    for line in lines[start : start + MAX_TRACEBACK_LOOKAHEAD]:
        if line.stream != stream:
            continue  # another process's lines, interleaved
        stripped = line.text.strip()
        if stripped.startswith('File "'):
            frames.append([_PACKAGE_PATH.sub(r'File "\1"', stripped)])
        elif stripped and line.text[:1] not in " \t":
            break
        elif frames and len(frames[-1]) == 1 and stripped and not _CARETS.match(line.text):
            frames[-1].append(f"`{stripped}`")
    called = ""
    while len(frames) > 1 and (library := _python_own(frames[-1][0])):  # Python's own (argparse, asyncio)
        called = f" (which called Python's {library})"
        frames.pop()
    where = " outside Python's standard library" if called else ""
    said = ' <- '.join(': '.join(f) for f in reversed(frames[-2:]))
    return f"; innermost frames{where}: {said}{called}" if frames else ""


def strongest(evidence: tuple[FailureEvidence, ...]) -> FailureEvidence | None:
    """The evidence line that best stands for the failure when no rule explains it: the most convincing kind,
    then the earliest line."""
    return min(evidence, key=lambda e: (KINDS.index(e.kind), e.line), default=None)


def as_exception(evidence: FailureEvidence) -> LoggedException:
    """An evidence line as the exception the unknown-failure finding reports."""
    return LoggedException(evidence.level or "log line", evidence.text, (), evidence.stream, evidence.line)


def fails(report: Report) -> bool:
    """Whether the report exits 1 under the default --fail-on error."""
    return report.exit_code("error") == 1


def uphold(report: Report, evidence: tuple[FailureEvidence, ...], failure_finding: Callable[[FailureEvidence], Finding]
           ) -> Report:
    """The contract: a report whose log shows failure evidence exits 1 (the evidence is cited in extra
    'failure_evidence'); when the diagnosis made no failing finding, ``failure_finding`` of the strongest
    evidence line is put first."""
    extra = dict(report.extra, failure_evidence=[
        {"line": e.line, "kind": e.kind, "text": e.text[:300]} for e in evidence[:20]])
    report = replace(report, extra=extra)
    best = strongest(evidence)
    if best is None or fails(report):
        return report
    # a failure no family names is the family 'other', as every unknown failure is
    extra = dict(extra, family=extra.get("family") or "other")
    return replace(report, findings=(failure_finding(best),) + report.findings, extra=extra)


# an error's hint where its details are printed -> the mark of those lines (NCCL's checks end 'run with NCCL_DEBUG=INFO
# for details'; with it set, NCCL prints why as 'NCCL WARN' lines)
_DETAILS_AT = (("NCCL_DEBUG=INFO for details", "NCCL WARN"),)
CITED_LINES = 4  # failure lines quoted under an unknown failure, besides the one it is reported by


CITED_COMPONENT_LINES = 2  # other components' error records quoted under a failure a rule knows
# another component's error record in vLLM's process (a GPU-sharing shim, a C library): '[HAMI-core ERROR (...)]: ...'
_COMPONENT_RECORD = re.compile(r"^\[[\w.-]{2,40} (?:ERROR|FATAL)\b[^\]\n]{0,80}\]:? \S")


def cite_failure_lines(report: Report, evidence: tuple[FailureEvidence, ...], unknown_rule: str) -> Report:
    """A failure no rule knows is told in the log's own words: its other failure lines (the ERROR records, failing
    calls and messages around it, which name the values that failed) are quoted under it, in log order. Under one a
    rule knows, another component's own error records are quoted (what it said may be why vLLM saw what it saw)."""
    if not report.findings:
        return report
    if report.findings[0].rule_id != unknown_rule:
        return _cite_component_records(report, evidence)
    finding = report.findings[0]
    shown = " ".join(finding.evidence)
    frame_lines = {e.line for e in evidence if e.text.lstrip().startswith('File "')}
    quoted = [e for e in sorted(evidence, key=lambda e: e.line)
              if e.kind != "wrapper" and f"log line {e.line}" not in shown and e.text.strip()[:80] not in shown
              # a traceback's frames and code lines, and the line joining two exceptions, are not failure lines
              and e.line not in frame_lines and e.line - 1 not in frame_lines and e.text.strip() not in (CAUSE, CONTEXT)
              # nor its header and caret lines (logger.exception prints each line of a traceback as an ERROR record)
              and not e.text.lstrip().startswith(TRACEBACK_START) and not _CARETS.match(" " + e.text.strip())]
    if not quoted:
        return report
    # an error that says where its details are ('run with NCCL_DEBUG=INFO for details'): those lines first
    pointed = next((mark for hint, mark in _DETAILS_AT if hint in shown), None)
    if pointed is not None:
        quoted.sort(key=lambda e: pointed not in e.text)
    lines = tuple(f"failure line {e.line} ({e.kind}): {e.text.strip()[:300]}" for e in quoted[:CITED_LINES])
    return replace(report, findings=(replace(finding, evidence=finding.evidence + lines),) + report.findings[1:])


def _cite_component_records(report: Report, evidence: tuple[FailureEvidence, ...]) -> Report:
    """Under a failure a rule knows: another component's error records, and the log's first exception when the rule
    matched a plain line and no exception is shown (a framework's RPC failed: the exception inside it says why)."""
    finding = report.findings[0]
    shown = " ".join(finding.evidence)
    records = [e for e in evidence if e.level is None and _COMPONENT_RECORD.match(e.text.strip())
               and e.text.strip()[:80] not in shown]
    exceptions = [e for e in evidence if e.kind == "exception"]
    unshown = [] if any(e.text.strip()[:80] in shown for e in exceptions) else exceptions[:1]
    # the record a logger.exception(...) call printed above its traceback ('Error in create_messages: Grammar error:
    # Unimplemented keys: ["propertyNames"]'): the caller's words, often the detail the exception's message lacks
    headers = {e.line for e in evidence if e.text.lstrip().startswith(TRACEBACK_START)}
    logged_with = [e for e in evidence if e.line + 1 in headers and e.kind == "error level"
                   and e.text.strip()[:80] not in shown and not e.text.lstrip().startswith(TRACEBACK_START)]
    if not records and not unshown and not logged_with:
        return report
    lines = tuple(f"another component's error record, line {e.line}: {e.text.strip()[:300]}"
                  for e in records[:CITED_COMPONENT_LINES])
    lines += tuple(f"exception in the log, line {e.line}: {e.text.strip()[:300]}" for e in unshown)
    lines += tuple(f"logged with its traceback, line {e.line}: {e.text.strip()[:300]}" for e in logged_with[:1])
    return replace(report, findings=(replace(finding, evidence=finding.evidence + lines),) + report.findings[1:])
