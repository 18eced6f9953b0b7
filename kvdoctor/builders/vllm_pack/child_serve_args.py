"""Child tasks `serve_args` and `dtypes`: vLLM's own `vllm serve` parser, every action dumped with the file:line of
its add_argument call, and the values of its CacheDType / ModelDType literals."""
from __future__ import annotations

import argparse
import importlib
import inspect
import os

from kvdoctor.builders.vllm_pack.child_shared import assignment_lines


_CALL_SITES: dict[int, str] = {}


def _record_call_sites(ctx):
    original = argparse._ActionsContainer.add_argument

    def add_argument(self, *args, **kwargs):
        action = original(self, *args, **kwargs)
        for frame in inspect.stack()[1:8]:
            file = os.path.realpath(frame.filename)
            if file.startswith(ctx.SRC + os.sep) and not file.endswith("argparse_utils.py"):
                _CALL_SITES[id(action)] = f"{ctx.rel_path(file)}:{frame.lineno}"
                break
        return action

    argparse._ActionsContainer.add_argument = add_argument


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and value != value:
            return "nan"
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is argparse.SUPPRESS:
        return "==SUPPRESS=="
    return repr(value)


def _type_name(t) -> str | None:
    if t is None:
        return None
    name = getattr(t, "__name__", None) or type(t).__name__
    if name == "<lambda>" or name == "partial":
        return repr(t)[:60] if name == "partial" else "lambda"
    return name


def dump_serve_args(ctx) -> dict:
    """Every action of the `vllm serve` subparser as the `vllm` CLI builds it, with its add_argument call site."""
    _record_call_sites(ctx)
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402
    except ImportError:  # before 0.11
        try:
            from vllm.utils import FlexibleArgumentParser  # noqa: E402
        except ImportError:  # before 0.5: plain argparse, and no `vllm serve`
            FlexibleArgumentParser = None

    # the `vllm serve` subparser exactly as the `vllm` CLI builds it
    try:
        from vllm.entrypoints.cli import serve as serve_module
    except ImportError:  # before 0.7: vllm/scripts.py's main() builds it
        serve_module = None
    command = "vllm serve"
    if serve_module is not None:
        make_arg_parser = serve_module.make_arg_parser
        root = FlexibleArgumentParser(prog="vllm")
        subparsers = root.add_subparsers(required=False, dest="subparser")
        parser = serve_module.ServeSubcommand().subparser_init(subparsers)
    elif FlexibleArgumentParser is not None:
        parser, make_arg_parser = _scripts_serve_parser(FlexibleArgumentParser)
    else:  # the OpenAI server's own parser (`python -m vllm.entrypoints.openai.api_server`)
        from vllm.entrypoints.openai.cli_args import make_arg_parser

        parser, command = make_arg_parser(), API_SERVER
    actions = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            kind = "help"
        else:
            kind = type(action).__name__
        help_text = action.help if isinstance(action.help, str) else None
        first = None
        if help_text and help_text != argparse.SUPPRESS:
            first = help_text.strip().split("\n")[0].strip()[:160]
        choices = action.choices
        if choices is not None:
            try:
                choices = [_jsonable(c) for c in choices]
            except TypeError:
                choices = repr(choices)
        actions.append({
            "option_strings": list(action.option_strings),
            "dest": action.dest,
            "action": kind,
            "nargs": _jsonable(action.nargs),
            "const": _jsonable(action.const),
            "default": _jsonable(action.default),
            "type": _type_name(action.type),
            "choices": choices,
            "required": bool(action.required),
            "help": first,
            "hidden": action.help == argparse.SUPPRESS,
            "where": _CALL_SITES.get(id(action)),
        })
    return {
        "actions": actions,
        "allow_abbrev": bool(parser.allow_abbrev),
        "parser_class": ctx.where(FlexibleArgumentParser) if FlexibleArgumentParser else "argparse.ArgumentParser",
        "make_arg_parser": ctx.where(make_arg_parser),
        **({"command": command} if command != "vllm serve" else {}),
    }


API_SERVER = "python -m vllm.entrypoints.openai.api_server"
"""The only server command before 0.5 (no `vllm serve`): its parser is the one the pack reads then."""


class _ParserBuilt(Exception):
    """Raised instead of parsing: the CLI's root parser is built."""


def _scripts_serve_parser(FlexibleArgumentParser):
    """(the `vllm serve` subparser, make_arg_parser) of a release whose CLI is vllm/scripts.py (0.5-0.6): its own
    main() builds every subparser and then parses; parsing is stopped there and the root parser kept."""
    import vllm.scripts as scripts

    original = FlexibleArgumentParser.parse_args

    def stop(self, *args, **kwargs):
        raise _ParserBuilt(self)

    FlexibleArgumentParser.parse_args = stop
    try:
        scripts.main()
        raise RuntimeError("vllm/scripts.py main() returned without parsing")
    except _ParserBuilt as built:
        root = built.args[0]
    finally:
        FlexibleArgumentParser.parse_args = original
    subparsers = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices["serve"], scripts.make_arg_parser


def literal_values(ctx, module_name: str, name: str) -> dict:
    """Values of a typing.Literal alias (CacheDType, ModelDType) and the line that defines it."""
    import typing

    module = importlib.import_module(module_name)
    alias = getattr(module, name)
    values = list(typing.get_args(alias))
    file = inspect.getsourcefile(module)
    lines = assignment_lines(file, name)
    return {"values": values, "where": f"{ctx.rel_path(file)}:{lines[-1] if lines else None}"}


DTYPE_LITERALS = {"kv_cache_dtypes": ("vllm.config.cache", "CacheDType"), "model_dtypes": ("vllm.config.model", "ModelDType")}


def dtype_literals(ctx, out: dict) -> None:
    """out[kv_cache_dtypes / model_dtypes] from the release's literals; a failure goes to out["errors"] (the builder
    then falls back to the parser's choices)."""
    for key, (mod, name) in DTYPE_LITERALS.items():
        try:
            try:
                out[key] = literal_values(ctx, mod, name)
            except (ImportError, AttributeError):
                if not ctx.REQ.get("legacy"):
                    raise
                out[key] = literal_values(ctx, "vllm.config", name)  # before 0.11: one vllm/config/__init__.py
        except Exception as exc:  # an older layout: the builder falls back to the parser's choices
            out["errors"][key] = f"{type(exc).__name__}: {exc}"
