"""What one start-up's log says: started, failed (with the innermost error), timed out, crashed, or not a verdict.

Pure functions of the log text, so results can be re-read and re-classified without the GPU.

Outcomes: `started` (engine built and tokens generated), `failed` (an exception; `innermost` is the deepest cause),
`timeout` (the case's own limit; `stack_at_limit` says where it was; an exception raised after the limit's signal,
such as FlashInfer's JIT compiler child killed by it, is the limit's, not the configuration's), `crashed` (the process died without a
result: a signal or a hard exit), `env_error` (the machine, not the configuration: a module this run did not
ship, a library built for another torch), `cut` (the command's deadline, not the case's limit), `not_run`.
"""

from __future__ import annotations

import json
import re

RESULT = "KVD-RESULT "
PHASE = re.compile(r"^KVD-PHASE (\S+) ([\d.]+)$", re.M)
BACKEND_LOG = re.compile(r"Using (?:AttentionBackendEnum\.)?([A-Z0-9_]+) (?:attention )?backend")
ENV_MESSAGES = ("undefined symbol", "No module named", "cannot open shared object file", "version `GLIBC",
                "(unknown location)")  # the last: a namespace package left by a partly shipped dependency
ENV_TYPES = ("ModuleNotFoundError",)
VERDICTS = ("started", "failed", "crashed")


def parse_result(text: str) -> dict | None:
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT):
            try:
                return json.loads(line[len(RESULT):])
            except json.JSONDecodeError:
                return None
    return None


def phases(text: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in PHASE.finditer(text)}


def backends_logged(text: str) -> list[str]:
    return sorted(set(BACKEND_LOG.findall(text)))


def is_env_error(chain: list[dict]) -> bool:
    """An error of the machine's software (a module not shipped, an ABI mismatch), not of the configuration."""
    for link in chain:
        if link.get("type") in ENV_TYPES:
            return True
        if link.get("type") in ("ImportError", "OSError") and any(m in link.get("message", "") for m in ENV_MESSAGES):
            return True
    return False


def first_line(message: str) -> str:
    for line in message.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def summarize(chain: list[dict]) -> str:
    inner = chain[-1]
    outer = chain[0]
    text = f"{inner['type']}: {first_line(inner['message'])}"
    if outer is not inner:
        text = f"{outer['type']} <- " + text
    return text


def last_error_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        s = line.strip()
        if re.match(r"^[A-Za-z_.]*(Error|Exception|Fault)\b", s) or "Segmentation fault" in s or "Aborted" in s:
            return s[:300]
    return ""


def classify(text: str, returncode: int | None, timed_out: bool = False, cut: bool = False) -> dict:
    """The outcome record of one case from its whole log."""
    result = parse_result(text)
    out: dict = {"phases": phases(text), "backends_logged": backends_logged(text), "returncode": returncode}
    if result is not None:
        out["result"] = result
        if result.get("ok"):
            out["outcome"] = "started"
            out["summary"] = f"{len(result.get('tokens', []))} tokens in {result.get('total_s')} s"
        elif result.get("error"):
            chain = result["error"]
            out["outcome"] = "env_error" if is_env_error(chain) else "timeout" if timed_out else "failed"
            out["innermost"] = chain[-1]
            out["summary"] = summarize(chain)
        else:
            out["outcome"] = "failed"
            out["summary"] = "engine started but generated no tokens"
        return out
    if cut:
        out["outcome"], out["summary"] = "cut", "stopped by the command's deadline"
    elif timed_out:
        reached = max(out["phases"], key=out["phases"].get) if out["phases"] else "before import"
        out["outcome"], out["summary"] = "timeout", f"no result within the limit (last phase: {reached})"
    else:
        out["outcome"] = "crashed"
        out["summary"] = last_error_line(text) or f"process ended with {returncode} and no result"
    return out


def log_tail(text: str, lines: int) -> list[str]:
    keep = [line[:400] for line in text.splitlines() if not line.startswith(RESULT)]
    return keep[-lines:]


def stack_dump(text: str, limit: int = 80) -> list[str]:
    """The faulthandler dump in the log (every thread, most recent call first), as far as it goes."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(("Current thread 0x", "Thread 0x"))), None)
    if start is None:
        return []
    dump = []
    for line in lines[start:]:
        if not (line.startswith(("Current thread 0x", "Thread 0x", "  File ", "  <")) or not line.strip()):
            break
        dump.append(line[:300])
    return dump[:limit]
