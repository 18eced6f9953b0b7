"""The options of another project's server that starts vLLM's engine (TRL's `trl vllm-serve --tensor_parallel_size 2`),
read as the vLLM engine arguments it passes them as (kvdoctor/data/engine_launchers.yaml, `translating`): the words
come back spelt as `vllm serve`'s, each keeping its line and what the manifest wrote."""

from __future__ import annotations

from packaging.version import Version

from kvdoctor.data.engine_launchers import TRANSLATING_LAUNCHERS, TranslatingLauncher
from kvdoctor.scan.workload import Token, Translation

# transformers' string_to_bool (hf_argparser.py), which HfArgumentParser applies to a bool option's value
BOOL_WORDS = {"true": True, "yes": True, "t": True, "y": True, "1": True,
              "false": False, "no": False, "f": False, "n": False, "0": False}  # fmt: skip


def translated(argv: list[Token], launcher: TranslatingLauncher) -> list[Token]:
    """The launcher's words as vLLM serve's: its model first (positional), its options spelt as vLLM's, its own
    options (host, port) left out, a false switch left out (vLLM's default), and every word its parser refuses kept,
    marked refused. A variable kvdoctor cannot expand is kept as it is."""
    model: list[Token] = []
    words: list[Token] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        index += 1
        if not token.text.startswith("--"):
            words.append(token if token.text.startswith("$") else
                         _refused(token, launcher) if launcher.refuses_others else _left_out(token, launcher))
            continue
        name, inline, value_text = token.text[2:].partition("=")
        option = name.replace("-", "_")
        value: Token | None = Token(value_text, token.line) if inline else None
        if option in launcher.switches:
            if value is None and index < len(argv) and argv[index].text.lower() in BOOL_WORDS:
                value, index = argv[index], index + 1
            written = token.text + (f" {value.text}" if value is not None and not inline else "")
            if value is None or BOOL_WORDS.get(value.text.lower(), True):
                words.append(Token(_vllm_option(launcher.options[option][0]), token.line,
                                   Translation(launcher.name, written)))  # fmt: skip
            continue
        if value is None and index < len(argv) and not argv[index].text.startswith("-"):
            value, index = argv[index], index + 1
        written = token.text + (f" {value.text}" if value is not None and not inline else "")
        via = Translation(launcher.name, written)
        if option == launcher.config_option:
            words += [Token("--config", token.line, via)] + ([value] if value is not None else [])
        elif option in launcher.options and launcher.options[option][0] == "model" and value is not None:
            model = [Token(value.text, value.line, via)]
        elif option in launcher.options:
            words += [Token(_vllm_option(launcher.options[option][0]), token.line, via)]
            words += [value] if value is not None else []
        elif option not in launcher.own:
            mark = _refused if launcher.refuses_others else _left_out
            words += [mark(token, launcher)] + ([mark(value, launcher)] if value is not None and not inline else [])
    return model + words


def requirements_met(argv: list[Token], launcher: TranslatingLauncher) -> bool:
    """Whether the words give each option the launcher needs to start vLLM the value it needs (ms-swift's deploy:
    `--infer_backend vllm`, `--infer-backend=vllm`); a variable kvdoctor cannot expand meets none."""
    for option, wanted in launcher.requires.items():
        given = None
        for index, token in enumerate(argv):
            name, inline, value = token.text[2:].partition("=") if token.text.startswith("--") else ("", "", "")
            if name.replace("-", "_") == option:
                given = value if inline else (argv[index + 1].text if index + 1 < len(argv) else None)
        if given != wanted:
            return False
    return True


def translation_note(argv: tuple[Token, ...]) -> str | None:
    """What was read as what, for the workload's notes, or None when no word was translated."""
    launcher = next((t.via.launcher for t in argv if t.via is not None), None)
    if launcher is None:
        return None
    pairs = [f"{t.via.written} as {t.text}{_added_later(t.via)}" for t in argv
             if t.via is not None and not t.via.refused and not t.via.left_out and t.text.startswith("-")]  # fmt: skip
    left_out = [t.text for t in argv if t.via is not None and t.via.left_out]
    model = next((t for t in argv if t.via is not None and not (t.via.refused or t.via.left_out)
                  and not t.text.startswith("-")), None)
    if model is not None:
        pairs.insert(0, f"{model.via.written} as the model")
    own = f"its own options ({' '.join(left_out)}; host, port)" if left_out else \
        "its own options (host, port, log level)"
    return (f"{launcher}: its options read as the vLLM engine arguments it passes them as (" + "; ".join(pairs)
            + f"); {own} are not vLLM's and not judged")


def refused_words(argv: tuple[Token, ...]) -> tuple[Token, ...]:
    """The words a translating launcher's parser refuses, in order."""
    return tuple(t for t in argv if t.via is not None and t.via.refused)


def launcher_options(name: str) -> str:
    """'--model, --revision, ... (--host, --port, --log_level its own)': every option the named launcher has."""
    launcher = _named(name)
    own = ", ".join(f"--{o}" for o in launcher.own)
    return ", ".join(f"--{o}" for o in launcher.options) + f" ({own} its own)"


def _added_later(via: Translation) -> str:
    """' (TRL 0.18.0+)' for an option the launcher's first releases lack (their parser refuses it), else ''."""
    launcher = _named(via.launcher)
    option = via.written.split()[0][2:].partition("=")[0].replace("-", "_")
    releases = [release for _, release in launcher.options.values() if release is not None]
    release = launcher.release_of(option)
    if not release or not releases:
        return ""
    return f" ({launcher.project} {release}+)" if Version(release) > min(map(Version, releases)) else ""


def _named(name: str) -> TranslatingLauncher:
    return next(t for t in TRANSLATING_LAUNCHERS if t.name == name)


def _vllm_option(engine_argument: str) -> str:
    return "--" + engine_argument.replace("_", "-")


def _refused(token: Token, launcher: TranslatingLauncher) -> Token:
    return Token(token.text, token.line, Translation(launcher.name, token.text, refused=True))


def _left_out(token: Token, launcher: TranslatingLauncher) -> Token:
    return Token(token.text, token.line, Translation(launcher.name, token.text, left_out=True))
