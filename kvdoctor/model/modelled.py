"""The target's packages the pack builder models rather than asks (issue 27): named, with the official image's value
as the default, and the value a user states (`--target-package NAME=VALUE`, or KVDOCTOR_TARGET_PACKAGES).

A verdict that depends on one of these says which value it assumed; where the pack holds vLLM's answers for the
target's value (the release read with it, or asked again with it: 0.26.0-0.34.0 with flashinfer-cubin present,
kvdoctor/builders/vllm_pack/variants.py), the replay reads those; where it holds none, the verdict is undecided
(facts/attention.py), never a silent PASS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from kvdoctor.base.errors import UsageError

ENV_VAR = "KVDOCTOR_TARGET_PACKAGES"
"""Comma-separated NAME=VALUE items, read after the command line's (the command line wins)."""

OFFICIAL_IMAGE = "the official vllm/vllm-openai image's"


@dataclass(frozen=True)
class ModelledInput:
    """One input of vLLM's selection that depends on what the target image installed."""

    name: str
    """As the user states it: the package's distribution name."""
    default: str
    """The official vllm/vllm-openai image's value."""
    import_name: str
    """How the pack's `modelled.packages_present` records it when the builder modelled it as installed."""
    asks: str
    """What vLLM asks, in words, with where."""
    decides: str
    """Which verdicts it decides, in words."""
    absent_means: str
    """What 'absent' means for vLLM (what else would stand in for the package)."""


INPUTS: dict[str, ModelledInput] = {
    "flashinfer-cubin": ModelledInput(
        "flashinfer-cubin", "present", "flashinfer_cubin",
        "whether FlashInfer's TRT-LLM kernels are reachable (supports_trtllm_attention -> has_nvidia_artifactory: "
        "flashinfer-cubin installed, else a download from NVIDIA's artifactory at start-up; vllm/utils/flashinfer.py)",
        "nvfp4 KV caches on SM10x, FlashInfer for attention-sink models (SM9.0/10x/12x) and block sizes >= 128 on SM10x",
        "not installed and NVIDIA's artifactory not reachable from the pod"),
    "flashinfer": ModelledInput(
        "flashinfer", "present", "flashinfer",
        "whether FlashInfer is importable (has_flashinfer(), vllm/utils/flashinfer.py; flashinfer-python)",
        "every configuration where vLLM would pick FlashInfer or try it before the backend it picks",
        "flashinfer-python not installed in the image"),
}
"""Sources for the defaults: vLLM's docker/Dockerfile installs flashinfer-cubin and flashinfer-jit-cache into the
vllm-base stage of the image (`uv pip install --system flashinfer-cubin==...`, e.g. commit dead20b), and the CUDA
wheel requires flashinfer-python from 0.11 on (Requires-Dist; 0.10.2 does not)."""

VALUES = ("present", "absent")


@dataclass(frozen=True)
class TargetPackages:
    """The modelled inputs as the user stated them; the rest take the official image's value."""

    stated: tuple[tuple[str, str], ...] = ()
    """(name, 'present' | 'absent') the user stated, sorted by name."""

    def value(self, name: str) -> str:
        return dict(self.stated).get(name, INPUTS[name].default)

    def is_stated(self, name: str) -> bool:
        return name in dict(self.stated)

    def describe(self, name: str) -> str:
        """'flashinfer-cubin present (assumed: the official vllm/vllm-openai image's)' or '... absent (stated)'."""
        if self.is_stated(name):
            return f"{name} {self.value(name)} (stated)"
        return f"{name} {self.value(name)} (assumed: {OFFICIAL_IMAGE}; --target-package {name}=absent states another)"


def parse_target_packages(items: Iterable[str], environ: dict[str, str] | None = None) -> TargetPackages:
    """The stated values from `--target-package` items and KVDOCTOR_TARGET_PACKAGES; UsageError on a bad item."""
    stated: dict[str, str] = {}
    env_items = [i for i in ((environ or {}).get(ENV_VAR) or "").split(",") if i.strip()]
    for source, item in [(ENV_VAR, i) for i in env_items] + [("--target-package", i) for i in items]:
        name, sep, value = item.strip().partition("=")
        name, value = name.strip().lower().replace("_", "-"), value.strip().lower()
        if name == "flashinfer-python":
            name = "flashinfer"
        if not sep or name not in INPUTS or value not in VALUES:
            raise UsageError(
                f"{source} {item!r}: expected NAME=present|absent with NAME one of {', '.join(INPUTS)}",
                "e.g. --target-package flashinfer-cubin=absent (an image without FlashInfer's TRT-LLM cubins and no "
                "access to NVIDIA's artifactory)")
        stated[name] = value
    return TargetPackages(tuple(sorted(stated.items())))
