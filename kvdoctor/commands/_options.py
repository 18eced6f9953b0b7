"""Options that several commands take, declared once (typer's Annotated form): same flag, same help, same type."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, List, Optional

import typer

if TYPE_CHECKING:
    from kvdoctor.report.registry import FormatMenu

Offline = Annotated[bool, typer.Option("--offline", help="Never use the network (also HF_HUB_OFFLINE=1).")]
RulesFiles = Annotated[List[Path], typer.Option("--rules", help="Extra rules file(s), after the bundled rules.")]
NoCompile = Annotated[bool, typer.Option("--no-compile", help="Skip the dry-run compile of vLLM's kernels.")]
CompileTimeout = Annotated[float, typer.Option("--compile-timeout", help="Seconds before a compile is given up.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Compile again even if a cached result exists.")]
FixSources = Annotated[List[str], typer.Option(
    "--fix-source", help="vLLM wheels/trees (or dirs of wheels) to verify upgrade fixes with.")]
VllmSource = Annotated[Optional[str], typer.Option(
    "--vllm-source", help="A vLLM wheel or unpacked tree whose kernels to compile.")]
Revision = Annotated[Optional[str], typer.Option("--revision", help="Model revision on the Hugging Face hub.")]
ModelDtype = Annotated[Optional[str], typer.Option(
    "--dtype", help="As vLLM's --dtype (auto, half, float16, bfloat16, float, float32).")]
OutputFile = Annotated[Optional[Path], typer.Option(
    "--output", "-o", help="Write --format output here; the terminal still gets the text report.")]
FailOn = Annotated[str, typer.Option("--fail-on", help=(
    "Exit 1 when a finding reaches: error, warning, undecided (an error, or an error rule that unknown facts leave "
    "undecided: for CI without --gpu or --vllm-version), never."))]
Debug = Annotated[bool, typer.Option("--debug", help="Show tracebacks of kvdoctor's own errors.")]
TargetPackages = Annotated[List[str], typer.Option("--target-package", help=(
    "NAME=present|absent: what the target image has of a package kvdoctor's vLLM facts model (flashinfer-cubin: "
    "FlashInfer's TRT-LLM cubins, or NVIDIA's artifactory reachable; flashinfer). Default: the official "
    "vllm/vllm-openai image's (present), shown as assumed. Also KVDOCTOR_TARGET_PACKAGES=NAME=VALUE,..."))]
ConfigFile = Annotated[Optional[Path], typer.Option(
    "--config", help="Config file (default: nearest kvdoctor.toml or pyproject.toml [tool.kvdoctor]).")]


def format_option(menu: FormatMenu) -> Any:
    """`--format/-f`, defaulting to the command's terminal format; the choices live in report/registry.py."""
    return typer.Option(menu.terminal, "--format", "-f", help=menu.option_help)


def verbose_option(what: str) -> Any:
    """`--verbose/-v`: `what` says what it adds for this command."""
    return typer.Option(False, "--verbose", "-v", help=what)


def target_packages(items: list[str]) -> tuple[str, ...]:
    """KVDOCTOR_TARGET_PACKAGES's items, then --target-package's (the later wins), checked now: a bad one is exit 2."""
    import os

    from kvdoctor.model.modelled import ENV_VAR, parse_target_packages

    from_env = tuple(i for i in os.environ.get(ENV_VAR, "").split(",") if i.strip())
    parse_target_packages((), {ENV_VAR: ",".join(from_env)})  # a bad item is named as the variable's
    parse_target_packages(items)
    return from_env + tuple(items)
