"""Run by tools/measure_config_oracle.py inside vLLM's CPU build (~/.cache/kvdoctor-vllmcpu): for each config
directory, vLLM's own `vllm.config.ModelConfig` (no tokenizer, no network, no remote code), and one JSON line with
what it derived: the default max_model_len, the answer to each --max-model-len probe (accepted length or vLLM's
error), the quantization method it resolved and the dtype.

The platform's quantization list is emptied (as CUDA's is), so the method is the one ModelConfig resolves from the
checkpoint, not the CPU build's "not supported in cpu" refusal; the CPU platform's bf16 / fp16 / fp32 list is the
same as an Ampere-or-newer GPU's, so the dtype stands for such a GPU's.

The CPU build's venv has no torchvision, which transformers' image processors import at module level (vLLM's
Qwen3-VL / Qwen3.5 / Gemma model files import those processors, and the model registry inspects the architecture
in a subprocess): when it is missing, an import-only stand-in goes first on PYTHONPATH. Nothing of it runs while the
config is read; the vision preprocessing it would serve is not part of what is measured."""

import json
import os
import sys
import traceback

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.pop("VLLM_ALLOW_LONG_MAX_MODEL_LEN", None)


TORCHVISION_STAND_IN = """
__version__ = "0.28.0"  # the release that pairs with the venv's torch 2.13


class _Anything:
    def __getattr__(self, name):
        return _Anything()

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __mro_entries__(self, bases):
        return (object,)


def __getattr__(name):
    return _Anything()
"""


def provide_torchvision_stand_in() -> None:
    """An import-only `torchvision` (and the submodules transformers imports) when the venv has none."""
    import atexit
    import importlib.util
    import shutil
    import tempfile
    from pathlib import Path

    if importlib.util.find_spec("torchvision") is not None:
        return
    root = Path(tempfile.mkdtemp(prefix="kvdoctor-oracle-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for module in ("torchvision", "torchvision.transforms", "torchvision.transforms.v2",
                   "torchvision.transforms.v2.functional", "torchvision.transforms.functional", "torchvision.io",
                   "torchvision.ops"):  # fmt: skip
        package = root.joinpath(*module.split("."))
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(TORCHVISION_STAND_IN)
    sys.path.insert(0, str(root))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))


def one_line(exc: BaseException) -> str:
    """The exception's own message: a pydantic ValidationError wraps __post_init__'s ValueError."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            inner = (first.get("ctx") or {}).get("error")
            if inner is not None:
                return f"{type(inner).__name__}: {inner}"
            return f"{type(exc).__name__}: {first.get('msg')}"
        except Exception:  # noqa: BLE001 - fall back to str()
            pass
    return f"{type(exc).__name__}: {exc}"


def model_config(directory: str, max_model_len: int | None):
    from vllm.config import ModelConfig

    return ModelConfig(model=directory, tokenizer=directory, skip_tokenizer_init=True, trust_remote_code=False,
                       dtype="auto", max_model_len=max_model_len)


def inspect_in_process() -> None:
    """The model registry inspects an architecture's class in a subprocess so as not to initialise CUDA; the CPU build
    has none to initialise, so it is done here (the answers are the same, cached alike; a cold run is minutes faster)."""
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()


def probe(directory: str, probes: list[str]) -> dict:
    from vllm.platforms import current_platform

    type(current_platform).supported_quantization = []  # CUDA's: every method passes the platform check
    out: dict = {"dir": directory}
    try:
        config = model_config(directory, None)
    except Exception as exc:  # noqa: BLE001 - vLLM's refusal is the answer
        message = one_line(exc)
        out["error"] = message
        out["remote_code"] = "trust_remote_code" in message
        return out
    default = config.max_model_len
    derived, key = config.model_arch_config.derived_max_model_len_and_key
    out.update(max_model_len=default, derived_key=key, quantization=config.quantization,
               dtype=str(config.dtype).removeprefix("torch."))
    out["probes"] = {}
    for name in probes:
        requested = {"plus_one": default + 1, "double": 2 * default}[name]
        try:
            out["probes"][name] = {"requested": requested, "max_model_len": config.get_and_verify_max_len(requested)}
        except Exception as exc:  # noqa: BLE001
            out["probes"][name] = {"requested": requested, "error": one_line(exc)}
    return out


def main() -> None:
    request = json.loads(sys.argv[1])
    provide_torchvision_stand_in()
    inspect_in_process()
    for directory in request["dirs"]:
        try:
            result = probe(directory, request["probes"])
        except Exception:  # noqa: BLE001 - one config's crash must not end the run
            result = {"dir": directory, "crash": traceback.format_exc(limit=3)[-2000:]}
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
