"""`kvdoctor verify URL`: after the rollout, prove the running vLLM server is the configuration that was checked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from kvdoctor.commands._options import Debug, FailOn, ModelDtype, OutputFile, format_option, verbose_option
from kvdoctor.commands._run import run_and_exit
from kvdoctor.report.registry import VERIFY


def register(app: typer.Typer) -> None:
    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def verify(
        ctx: typer.Context,
        url: str = typer.Argument(..., help="The vLLM server's base URL, e.g. http://vllm.default.svc:8000."),
        report: Optional[Path] = typer.Option(None, "--report", help="The `kvdoctor check --format json` report to compare with."),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="Or check's own flags: the model (as check)."),
        kv_cache_dtype: Optional[str] = typer.Option(None, "--kv-cache-dtype", help="As vLLM's --kv-cache-dtype (as check)."),
        dtype: ModelDtype = None,
        gpu: Optional[str] = typer.Option(None, "--gpu", help="Target GPU (as check)."),
        vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help="The vLLM version that was checked (as check)."),
        api_key_file: Optional[Path] = typer.Option(None, "--api-key-file", help="A file holding the server's API key (sent as a Bearer token; never printed)."),
        api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="An environment variable holding the API key (default: KVDOCTOR_API_KEY when set)."),
        header: List[str] = typer.Option([], "--header", "-H", help="An extra header 'Name: value' (value '@FILE' or '$VAR' reads a secret; never printed)."),
        timeout: float = typer.Option(30.0, "--timeout", help="Seconds each request may take."),
        cacert: Optional[Path] = typer.Option(None, "--cacert", help="PEM bundle of the CA that signs the server's certificate (default: the system store)."),
        cert: Optional[Path] = typer.Option(None, "--cert", help="PEM client certificate for a mutual-TLS server (may hold the key too)."),
        key: Optional[Path] = typer.Option(None, "--key", help="PEM private key of --cert, when not in the same file."),
        insecure: bool = typer.Option(False, "--insecure", help="Do not verify the server's certificate: only when given here; the report says so and never PASSes."),
        served_model_name: Optional[str] = typer.Option(None, "--served-model-name", help="The model name to complete with (default: the first /v1/models lists)."),
        prompt: Optional[str] = typer.Option(None, "--prompt", help="A text prompt (default: token ids, which servers with --skip-tokenizer-init take too)."),
        max_tokens: int = typer.Option(4, "--max-tokens", help="Tokens the completion asks for."),
        no_completion: bool = typer.Option(False, "--no-completion", help="Send no completion (read-only)."),
        output_format: str = format_option(VERIFY),
        output: OutputFile = None,
        fail_on: FailOn = "error",
        verbose: bool = verbose_option("Also list the server's cache_config labels and each endpoint's time."),
        debug: Debug = False,
    ) -> None:
        """Compare a running vLLM server with what `kvdoctor check` judged: vLLM version, KV-cache dtype, block size,
        max_model_len, KV capacity; send one tiny completion. Exit 0: it runs what was checked and answers; 1: a
        mismatch or a failed completion; 2: the server cannot be reached or spoken to.

        What was checked: --report check.json, or check's own flags (and vLLM serve flags, or a pasted
        `-- vllm serve ...` command), judged by check without a compile."""
        from kvdoctor.commands.check import split_pasted_command

        pasted, loose = split_pasted_command(list(ctx.args), sys.argv[1:])
        own_flags = tuple(sorted(o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")))
        flags = dict(model=model, kv_cache_dtype=kv_cache_dtype, dtype=dtype, gpu=gpu, vllm_version=vllm_version)

        def work():
            from kvdoctor.inputs.validate import validate_check_inputs
            from kvdoctor.verify.connection import base_url
            from kvdoctor.verify.credentials import read_credentials
            from kvdoctor.verify.run import VerifySettings, run_verify
            from kvdoctor.verify.tls import TlsSettings, check_tls_settings

            validate_check_inputs(fail_on=fail_on)
            _validate(timeout, max_tokens)
            server_url = base_url(url)
            tls = TlsSettings(cacert, cert, key, insecure)
            check_tls_settings(tls, server_url)
            credentials = read_credentials(api_key_file, api_key_env, list(header))
            checked = _checked(report, flags, pasted, loose, own_flags)
            settings = VerifySettings(timeout, served_model_name, prompt, max_tokens, not no_completion, fail_on, tls)
            return run_verify(server_url, checked, credentials, settings)

        run_and_exit(work, VERIFY, output_format, output, fail_on, verbose, debug)


def _validate(timeout: float, max_tokens: int) -> None:
    from kvdoctor.base.errors import UsageError

    if not timeout > 0:
        raise UsageError(f"--timeout {timeout:g}: must be more than 0 seconds")
    if max_tokens < 1:
        raise UsageError(f"--max-tokens {max_tokens}: must be at least 1")


def _checked(report: Path | None, flags: dict, pasted: list[str], loose: list[str], own_flags: tuple[str, ...]):
    """What was checked: the report file, or check run on the flags (no compile: only its facts are compared)."""
    from kvdoctor.base.errors import UsageError
    from kvdoctor.verify.checked import from_facts, read_check_report

    given = any(v is not None for v in flags.values()) or pasted or loose
    if report is not None:
        if given:
            raise UsageError("--report and check's flags both given", "compare with the report, or with flags: one of them")
        return read_check_report(report)
    if not given:
        raise UsageError("nothing to compare the server with",
                         "give --report check.json, or the flags check judged (--model ... --kv-cache-dtype ...)")  # fmt: skip
    from kvdoctor.base.cache_dir import default_cache_dir
    from kvdoctor.check.run import CheckSettings, run_check
    from kvdoctor.facts.collect import CheckOptions

    from kvdoctor.inputs.pasted_command import typed_command

    options = CheckOptions(serve_argv=tuple(typed_command(pasted)), loose_flags=tuple(loose), own_flags=own_flags,
                           cache_dir=default_cache_dir(), resolve_kernels=False, **flags)  # fmt: skip
    checked = run_check(options, CheckSettings(compile=False))
    return from_facts(checked.facts, "kvdoctor check on the given flags (no compile)", checked.verdict)
