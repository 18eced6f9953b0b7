"""Find `vllm serve` in a container's command: exec form, a shell script (`sh -c "... && vllm serve ..."`),
`python -m vllm.entrypoints...`, or args alone for an image whose entrypoint is vLLM's server."""

from __future__ import annotations

import fnmatch
import itertools
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Iterator

import yaml

from kvdoctor.data.engine_launchers import (ENGINE_LAUNCHERS, EXTENSION_PROGRAMS, TRANSLATING_LAUNCHERS, WRAPPER_MODULE,
                                            WRAPPER_NAME, EngineLauncher, TranslatingLauncher)
from kvdoctor.scan import nodes
from kvdoctor.scan.shell_arrays import expand_arrays, script_arrays
from kvdoctor.scan.translated_options import requirements_met, translated
from kvdoctor.scan.workload import Token

SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
PREFIX_WORDS = {"exec", "nohup", "setsid", "time", "env", "stdbuf", "eval"}
OPERATORS = {"&&", "||", ";", "|", "&", ";;", "|&"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# $VAR, ${VAR}, ${VAR:-default}; a script's positional ${2:-default} too (its default is what runs without arguments).
# $VAR, ${VAR}, ${VAR:-default}, the default holding one level of ${...} (`${SERVED:-${MODEL}}`)
SHELL_VARIABLE = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(?::-((?:[^{}]|\$\{[^{}]*\})*))?\})")
# A redirection (> log, 2>&1, >>file, &>file, < in, <<EOF) after a word boundary: the shell's, never a vLLM argument.
REDIRECTION = re.compile(r"(?<![^\s;&|])(?:[0-9]*|&)(?:>>?|<<-?|<)(?:&[0-9-]+|\s*(?:'[^']*'|\"[^\"]*\"|[^\s;&|<>'\"()]+))")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
# `uv run vllm serve ...`: tools that run the rest of their words in a project's environment, and their options
# that take a value as the next word.
RUNNERS = {"uv", "poetry", "pipenv", "pdm", "conda", "micromamba", "rye", "hatch"}
# programs that run a command under them (profilers, CPU and NUMA placement, a systemd scope or cgroup) after options
# of their own
PROFILERS = {"nsys", "ncu", "nv-nsight-cu-cli", "numactl", "taskset", "py-spy", "perf", "chrt", "nice", "ionice",
             "systemd-run", "cgexec", "prlimit"}  # fmt: skip
MAX_PROFILER_WORDS = 40
RUNNER_VALUE_OPTIONS = {"-n", "--name", "-p", "--prefix", "--with", "--python", "--env-file", "--project",
                        "--directory", "--package", "--extra", "--group", "--from", "--spec", "--index-url",
                        "--pip-args"}  # fmt: skip
# a tool runner's package pin: `uvx vllm@0.11.0`, `uvx --from vllm==0.11.0 vllm`, `pipx run --spec vllm==0.11.0 vllm`
TOOL_PIN = re.compile(r"^vllm(?:\[[\w,-]+\])?(?:@|==)v?(\d+\.\d+\.\d+(?:\.post\d+)?)$")
FLAGS_ONLY_NOTE = "image {image} runs its own entrypoint with vLLM serve options only: read as vllm serve"
WRAPPER_NOTE = ("image {image} runs {script} with vLLM serve options as its arguments: read as vllm serve with them "
                "({script} itself is not read, nor what it adds, such as the model)")  # fmt: skip
# A reference the manifest leaves to the host or a Secret: $VAR, ${VAR}, $(VAR) (Kubernetes), and a shell's
# $(command) or $((arithmetic)) it could not evaluate: unexpanded here.
# a variable the shell fills at run time: $VAR, ${VAR...}, $(command), and a script's positional parameters ($1, ${2},
# "$@"), which only its caller knows
UNRESOLVED = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|[0-9@*]"
                        # ${NAME...}, with one nested ${...} inside (bash's ${arr[@]+"${arr[@]}"})
                        r"|\{(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*])(?:[^{}]|\{[^{}]*\})*\}"
                        r"|\((?:[^()]|\([^()]*\))*\))"
                        # a template's placeholder that a deploy step replaces (sed 's/__MODEL__/.../'): __MODEL__
                        r"|\b__[A-Z][A-Z0-9_]*__\b")
# $((expression)): the shell's integer arithmetic, evaluated when every variable in it is known.
ARITHMETIC = re.compile(r"\$\(\(((?:[^()]|\([^()]*\))*)\)\)")
ARITHMETIC_NAME = re.compile(r"\$?\b([A-Za-z_][A-Za-z0-9_]*)\b")
# python's own options before -m (`python -u -m vllm.entrypoints...`); these take the next word as their value.
PYTHON_VALUE_OPTIONS = {"-X", "-W"}
GENERIC_SERVER_OPTIONS = {"--host", "--port", "--help", "--version", "--config", "--api-key", "--ssl-keyfile",
                          "--ssl-certfile", "--root-path", "--uvicorn-log-level"}  # fmt: skip


Word = tuple[Token, "yaml.Node | None"]
"""A Token and the YAML scalar it was read from (to place the words of a shell script on their lines)."""


def words_of(node: yaml.Node | None, source_text: str, split: bool = False, null_as_empty: bool = False) -> list[Word]:
    """A command/args/entrypoint node as words: a list item each, or a string split like a shell (Compose).
    ``null_as_empty``: a null item is an empty word (Compose's YAML node value), not left out."""
    if nodes.is_seq(node):
        texts = [("" if null_as_empty and _is_null(item) else nodes.text(item), item) for item in nodes.items(node)]
        return [(Token(text, nodes.line(item)), item) for text, item in texts if text is not None]
    text = nodes.text(node)
    if text is None:
        return []
    if not split:
        return [(Token(text, nodes.line(node)), node)]
    try:
        words = shell_split(text)
    except ValueError:
        words = text.split()
    return [(token, node) for token in _place(words, node, source_text)]


# a `${...}` expansion (one level of nesting in its default): a shell, and Compose before it splits a string command,
# read it whole, whatever spaces its default holds (`${TOOL_FLAGS:- }`, `${ARGS:-a b}`)
_EXPANSION = re.compile(r"\$\{[^{}]*(?:\$\{[^{}]*\}[^{}]*)*\}")
_SPACE_KEPT = ("\x00", "\x01")


def shell_split(text: str, comments: bool = False) -> list[str]:
    """shlex's split, with each `${...}` expansion kept in one word."""
    spans = [m for m in _EXPANSION.finditer(text) if " " in m.group(0) or "\t" in m.group(0)]
    for match in reversed(spans):
        kept = match.group(0).replace(" ", _SPACE_KEPT[0]).replace("\t", _SPACE_KEPT[1])
        text = text[:match.start()] + kept + text[match.end():]
    words = shlex.split(text, comments=comments)
    return [w.replace(_SPACE_KEPT[0], " ").replace(_SPACE_KEPT[1], "\t") for w in words] if spans else words


def _is_null(node: yaml.Node) -> bool:
    return nodes.is_scalar(node) and node.tag == "tag:yaml.org,2002:null"


def only_serve_flags(args: list[Word], vllm_build: bool = False) -> bool:
    """Args alone (the image's own entrypoint) that are vLLM serve options: a locally built vLLM image. At least
    two options vLLM has beyond those any HTTP server has (one for an image named for vLLM, e.g. opea/vllm-gaudi),
    and three in four of all options vLLM's."""
    from kvdoctor.vllm_pack.candidates import all_serve_options

    if args and _runs_a_program(args[0][0].text):
        return False  # `IMAGE python3 bench.py --model M`: another program's options, not the entrypoint's
    if args and _after_launcher([token for token, _ in args]) is not None:
        return False  # `vllm serve M ...`, `vllm-omni serve M ...`: a whole command, not the entrypoint's flags
    known = all_serve_options()
    options = [canonical_option(t.text) for t, _ in args if t.text.startswith("--")]
    vllm_own = [o for o in options if o in known and o not in GENERIC_SERVER_OPTIONS]
    return len(vllm_own) >= (1 if vllm_build else 2) and 4 * sum(o in known for o in options) >= 3 * len(options)


PROGRAM = re.compile(r"^(?:python[0-9.]*|pypy3?|uv|torchrun|accelerate|deepspeed|ray|bash|sh|zsh|dash|exec|env)$"
                     r"|\.(?:py|sh|bash)$")


def _runs_a_program(word: str) -> bool:
    """Whether a command's first word runs a program (python3, bash, ./bench.py), not an option or a model name."""
    return PROGRAM.search(PurePosixPath(word).name) is not None


def wrapper_script(command: list[Word], args: list[Word], image_runs_vllm: bool) -> str | None:
    """A command of one script (`/scripts/startup.sh`, mounted from a ConfigMap) on a vLLM image, given only vLLM's
    serve options: a wrapper that hands them on to vLLM ("$@"). The script's path, else None."""
    if len(command) != 1 or not image_runs_vllm:
        return None
    script = command[0][0].text
    name = PurePosixPath(script).name
    if name in SHELLS or _after_launcher([command[0][0]]) is not None:
        return None
    if not (script.startswith(("/", "./")) or name.endswith(".sh")):
        return None
    return script if only_serve_flags(args, vllm_build=True) else None


# A shell's short options with -c among them (`-c`, `-lc`, `-ec`, `-exc`): the next word is the script.
SHELL_COMMAND_OPTION = re.compile(r"^-[A-Za-z]*c[A-Za-z]*$")


def canonical_option(word: str) -> str:
    """'--max_model_len=8192' -> '--max-model-len' (vLLM reads _ as -)."""
    return "--" + word[2:].partition("=")[0].replace("_", "-")


def serve_argv(command: list[Word], args: list[Word], entrypoint_is_vllm: bool, source_text: str) -> list[Token] | None:
    """The argv after the vLLM launcher (model and flags, VAR=value prefixes kept), or None: not vLLM."""
    words = [token for token, _ in command + args]
    if not command and entrypoint_is_vllm:
        given = [token for token, _ in args]
        if given and _after_launcher(given) is not None:
            # the image's ENTRYPOINT is vLLM's launcher already, and these words (CMD, args, a Compose command) are
            # its arguments: the launcher they repeat reaches vLLM's parser as positional words (`vllm serve vllm
            # serve MODEL`, "unrecognized arguments"), so they stay in the argv after the entrypoint's own
            return [Token("vllm", given[0].line), Token("serve", given[0].line)] + given
        return given
    found = _after_launcher(words)
    if found is not None:
        return found
    if words and PurePosixPath(words[0].text).name in SHELLS:
        pairs = command + args
        flag = next((i for i, w in enumerate(words[:-1]) if SHELL_COMMAND_OPTION.match(w.text)), None)
        after = flag + 1 + (flag + 2 < len(words) and words[flag + 1].text == "--") if flag is not None else None
        script = pairs[after] if after is not None else None  # `bash -lc -- "script"`: -- ends bash's options
        if script is not None:
            found = _in_script(script[0], script[1], source_text)
            return _with_positionals(found, [token for token, _ in pairs[after + 2:]]) if found is not None else None
    return None


def script_argv(script: str, first_line: int) -> list[Token] | None:
    """The argv of the vLLM launcher in a script file's text (each word on its line), or None."""
    return _in_script(Token(script, first_line), None, "")


def run_script(node: yaml.Node | None, source_text: str) -> list[Token] | None:
    """The argv of the vLLM launcher in a shell script held as one YAML string (SkyPilot's `run:`), or None."""
    text = nodes.text(node)
    return _in_script(Token(text, nodes.line(node)), node, source_text) if text else None


def run_script_text(script: Token) -> list[Token] | None:
    """The argv of the vLLM launcher in a shell script's text whose first line is ``script.line``, or None."""
    return _in_script(script, None, "")


SCRIPT_ASSIGNMENT = re.compile(r"^\s*(?:(?:export|local|readonly)\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*?)\s*$")  # one word once split
DEFAULT_ASSIGNMENT = re.compile(r"^\s*:\s+\"?\$\{([A-Za-z_][A-Za-z0-9_]*):?=([^}]*)\}\"?\s*$")
"""`: ${NAME:=default}`: the default assigned where the environment does not set it (bash(1), "Parameter Expansion")."""
APPEND = re.compile(r"^\s*(?:(\[\[?[^\]]*\]\]?)\s*&&\s*)?([A-Za-z_][A-Za-z0-9_]*)\+=(.*?)\s*$")
"""`NAME+=" --more"`, perhaps after a test (`[[ -n "$X" ]] && NAME+=" --x $X"`): a command line built piece by piece."""
BLOCK_OPENS = re.compile(r"^\s*(?:if|for|while|until|case|select)\b|\{\s*$")
BLOCK_CLOSES = re.compile(r"^\s*(?:(?:fi|done|esac)\b|\}(?=[\s;|&>]|$))")  # a function's `}` alone on its line too
LAUNCHER = re.compile(r"\bvllm\s+serve\b|\bvllm\.entrypoints\.")
RAY_START = re.compile(r"\bray\s+start\s+(?:[^\n;&|]*?\s)?--(?:head|address)\b")
"""`ray start --head` / `ray start --address=HEAD:6379` in the script that starts vLLM: vLLM runs on that Ray cluster."""


# a value taken from the script's own arguments ($1, "${2}", ${1#*=}, $OPTARG), as an option-parsing loop assigns it
POSITIONAL = re.compile(r"\$(?:[1-9]|\{[1-9][^}]*\}|OPTARG\b|\{OPTARG\})")


PYTHON_PROGRAM = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")


UNESCAPED_SUBSTITUTION = re.compile(r"(?<!\\)(?:\$\(|`)")
"""A command's output in a value (`$(...)`, backquotes): `\\$(...)` in double quotes is the text itself."""


def _holds_a_command(value: str) -> bool:
    """Whether a variable's value is a whole command line (`docker run ...`, `vllm serve ...`), not arguments, or a
    script that runs vLLM (CMD="source .venv/bin/activate; vllm serve ..." typed into tmux)."""
    if LAUNCHER.search(value) and ";" in value:
        return True
    words = value.split()
    while words and ASSIGNMENT.match(words[0]):  # `CUDA_VISIBLE_DEVICES=0,1 vllm serve ...`: the env it runs with
        words = words[1:]
    program = PurePosixPath(words[0]).name if words else ""
    # `python3 -m vllm.entrypoints.openai.api_server --model ${MODEL} ...` (a Python launcher of vLLM) too
    return len(words) > 2 and (program in COMMAND_PROGRAMS
                               or (PYTHON_PROGRAM.match(program) is not None and words[1] == "-m"
                                   and words[2].startswith("vllm")))


MAX_QUOTED_LINES = 200
"""Lines a quoted string may span (CMD="vllm serve $MODEL<newline>  --port 8000"); a longer span is a stray quote."""


def _continuations_joined(script: str) -> str:
    """The script with each line that ends in a backslash joined to the next (a comment's backslash continues
    nothing), and an assignment whose quoted value goes on over lines (CMD="vllm serve $MODEL<newline>  --port 8000")
    joined up to its closing quote."""
    out: list[str] = []
    continuing = False
    quoted = 0  # lines joined so far into an open quoted value
    for line in script.split("\n"):
        if continuing:
            out[-1] = out[-1][:-1] + " " + line
        elif quoted:
            out[-1] = out[-1] + " " + line
        else:
            out.append(line)
        continuing = out[-1].endswith("\\") and not line.lstrip().startswith("#")
        quoted = quoted + 1 if not continuing and quoted < MAX_QUOTED_LINES and _value_left_open(out[-1]) else 0
    return "\n".join(out)


_OPEN_VALUE = re.compile(r"""^\s*(?:export\s+)?[A-Za-z_]\w*=(["'])""")


def _value_left_open(line: str) -> bool:
    """Whether the line assigns a quoted value that it does not close."""
    opened = _OPEN_VALUE.match(line)
    if opened is None:
        return False
    quote, rest = opened.group(1), line[opened.end():]
    closing = rest.find("'") if quote == "'" else re.search(r'(?<!\\)(?:\\\\)*"', rest)
    return closing == -1 if quote == "'" else closing is None


def script_assignments(script: str, known: dict[str, str]) -> dict[str, str]:
    """`known` plus the script's plain assignments before its vLLM launcher line (NAME=value, export NAME=value),
    each value expanded from what is known so far. An `if` whose test the known values decide (`[ -z "$X" ]`,
    `[ "$X" = v ]`) runs or skips its branch as the shell would; in a block nothing decides (a loop, a function, a
    test of an unknown value) and from a command's output the value is unknown from there on (a block that only
    adds to it, NAME="$NAME ...", is read per branch by branch_assignments)."""
    values: dict[str, str] = dict(known)
    script = _continuations_joined(script)  # CMD="--model $M \<newline> --port 8000": one assignment
    for _, line, runs in ((n, part, runs) for n, whole, runs in decided_lines(script, values, stop=LAUNCHER)
                          for part in _statements(whole)):
        if False in runs:
            continue
        if (default := DEFAULT_ASSIGNMENT.match(line)) is not None and all(runs):
            if default.group(1) not in values:  # the environment is unknown here: the default runs
                values[default.group(1)] = _unquoted(default.group(2))
            continue
        if (appended := APPEND.match(line)) is not None:
            _append(values, appended, None if None in runs else all(runs))
            continue
        found = SCRIPT_ASSIGNMENT.match(line)
        if found is None:
            continue
        word = _one_word(found.group(2))
        if all(runs) and word is not None:
            (expanded,) = expand_shell_variables([Token(word, None)], values)
            # a whole command keeps its unknown parts as variables (CMD="docker run -e T=${TOKEN} ..."): each word
            # is judged, or left out, on its own where `exec $CMD` runs it
            if not UNRESOLVED.search(expanded.text) or _holds_a_command(expanded.text):
                values[found.group(1)] = expanded.text
                continue
        if runs and re.search(r"\$\{?" + found.group(1) + r"\b", found.group(2)):
            continue  # NAME="$NAME --more" in a branch nothing decides: branch_assignments reads it
        if runs and POSITIONAL.search(found.group(2)):
            continue  # MODEL="$2" while parsing the script's own options: the caller's choice, the default runs
        values.pop(found.group(1), None)  # unknown from here on
    return values


_STATEMENT_END = re.compile(r"""((?:[^;'"\\$]|\\.|'[^']*'|"(?:[^"\\]|\\.)*"|\$\{[^}]*\}|\$(?!\{))*)(;|$)""")


def _statements(line: str) -> list[str]:
    """The statements of one line (`: ${M:=x}; : ${P:=8000}; exec vllm serve ...`): split at each `;` outside quotes
    and ${...}; the line itself when it holds none (or a `;;` of a case)."""
    if ";" not in line or ";;" in line:
        return [line]
    parts = [found.group(1) for found in _STATEMENT_END.finditer(line) if found.group(1).strip()]
    return parts or [line]


PRINTS = re.compile(r"^\s*(?:echo|printf|log_\w+|logger)\b")
"""A line that prints text (a usage line naming `vllm serve`), not a command that runs it."""


def _assigns(line: str) -> bool:
    return SCRIPT_ASSIGNMENT.match(line) is not None or APPEND.match(line) is not None


def _unquoted(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _append(values: dict[str, str], appended: re.Match, runs: bool | None) -> None:
    """`NAME+=VALUE` (after a test, `[[ -n "$X" ]] && ...`): the value appended to a known NAME when the test holds
    with the known values; a test they do not decide, inline or a block around it (an `if`, a loop), leaves the
    optional piece out: the command stays known, less that flag."""
    test, name, value = appended.group(1), appended.group(2), appended.group(3)
    holds = _test_holds(test.strip(), values) if test else True
    if not holds or runs is None:
        return
    word = _one_word(value)
    if not runs or name not in values or word is None:
        values.pop(name, None)
        return
    (expanded,) = expand_shell_variables([Token(word, None)], values)
    values[name] = values[name] + expanded.text


def decided_lines(script: str, values: dict[str, str], stop: re.Pattern | None = None
                  ) -> Iterator[tuple[int, str, list[bool | None]]]:  # fmt: skip
    """Each line of the script that opens or closes no block (comments left out), with its index and, per `if` /
    loop block around it, whether it runs: True, False (a test the values decide against it) or None (not decided
    here). ``values`` is read when each `if` is met (a caller may add to it as it goes); ``stop``: the first line it
    matches ends the walk."""
    runs: list[bool | None] = []  # per open block
    taken: list[bool | None] = []  # per open block: whether a branch before this one ran (None: not decided)
    ends: str | None = None  # the word that ends the here-document being skipped
    for index, line in enumerate(script.splitlines()):
        if ends is not None:  # a here-document's body is data (`python - <<EOF ... while x: ... EOF`), no script
            ends = None if line.strip() == ends else ends
            continue
        if line.lstrip().startswith("#"):  # a comment (`# ./run.sh --max-num-seqs 8  # any vllm serve flag`)
            continue
        if "<<" in line and (heredoc := HEREDOC.search(line)) is not None and "<<<" not in line:
            ends = heredoc.group(2)
        if stop is not None and stop.search(line) and not _assigns(line) and not PRINTS.match(line):
            # the launcher itself; a line that assigns a command line (CMD="vllm serve ...") or prints a usage text
            # (echo "usage: $0 MODEL [extra vllm serve args]") is no launch. The statements before it on its line
            # (`: ${MODEL:=x}; exec vllm serve "$MODEL"`) still run first.
            for part in itertools.takewhile(lambda part: not stop.search(part), _statements(line)[:-1]):
                yield index, part, list(runs)
            return
        if BLOCK_CLOSES.match(line):
            if runs:
                runs.pop()
                taken.pop()
            continue
        if (opened := IF_LINE.match(line)) is not None and opened.group(1) == "elif" and runs:
            # an elif runs when no branch before it did and its own test holds
            runs[-1] = False if taken[-1] else None if taken[-1] is None else _test_holds(opened.group(2), values)
            taken[-1] = True if taken[-1] else runs[-1]
            continue
        if ELSE_LINE.match(line) and runs:
            runs[-1] = None if taken[-1] is None else not taken[-1]
            continue
        if BLOCK_OPENS.search(line):
            runs.append(_test_holds(opened.group(2), values) if opened is not None else None)
            taken.append(runs[-1])
            continue
        yield index, line, runs


# `if [ -z "$X" ]`, `if [[ "${X:-a}" == "b" ]]`, `if test -n "$X"`: the tests the known values decide
_TEST = re.compile(r"^\s*(?:\[\[?|test)\s+(?:(-[zn])\s+(\S+)|(\S+)\s+(==?|!=)\s+(\S+))"
                   r"\s*(?:\]\]?)?\s*;?\s*(?:then)?\s*$")


_JOINED_TESTS = re.compile(r"(?<=\])\s*(\|\||&&)\s*(?=\[)")
"""`[[ A ]] || [[ B ]]`, `[ A ] && [ B ]`: tests joined by the shell's list operators."""


def _test_holds(condition: str, values: dict[str, str]) -> bool | None:
    """Whether an `if`'s test holds with the known values; None when it is no simple test or a value is unknown.
    `[[ $X == *"VL"* ]]` matches X against the pattern (quoted parts literal), as bash's [[ does."""
    condition = re.sub(r"\s*;?\s*then\s*$", "", condition.strip())
    parts = _JOINED_TESTS.split(condition)
    if len(parts) > 1:
        result = _test_holds(parts[0], values)
        for operator, part in zip(parts[1::2], parts[2::2]):
            other = _test_holds(part, values)
            if operator == "||":
                result = True if result is True or other is True else None if None in (result, other) else False
            else:
                result = False if result is False or other is False else None if None in (result, other) else True
        return result
    match = _TEST.match(condition)
    if match is None:
        return None
    operands = [w for w in (match.group(2), match.group(3), match.group(5)) if w is not None]
    try:
        words = [shlex.split(w) for w in operands]
    except ValueError:
        return None
    texts = [w[0] if w else "" for w in words]
    expanded = [t.text for t in expand_shell_variables([Token(t, None) for t in texts], values)]
    if any(UNRESOLVED.search(t) for t in expanded):
        return None
    if match.group(1):
        return (expanded[0] == "") == (match.group(1) == "-z")
    pattern = condition.lstrip().startswith("[[") and _GLOB.search(operands[1])
    equal = _glob_match(expanded[0], operands[1], values) if pattern else expanded[0] == expanded[1]
    if equal is None:
        return None
    return equal == (match.group(4) != "!=")


_GLOB = re.compile(r"(?:^|[^\\])[*?\[]")


def _glob_match(text: str, pattern: str, values: dict[str, str]) -> bool | None:
    """`[[ TEXT == PATTERN ]]`: the pattern's unquoted * ? [...] match as globs, its quoted parts literally."""
    regex = ""
    for quoted_double, quoted_single, bare in re.findall(r'"([^"]*)"|\'([^\']*)\'|([^"\']+)', pattern):
        piece = quoted_double or quoted_single or bare
        if quoted_single:
            regex += re.escape(piece)
            continue
        (expanded,) = expand_shell_variables([Token(piece, None)], values)
        if UNRESOLVED.search(expanded.text):
            return None
        # fnmatch.translate gives '(?s:...)\Z': the group's inside is the piece's regex
        regex += re.escape(expanded.text) if quoted_double else fnmatch.translate(expanded.text)[4:-3]
    return re.fullmatch(regex, text, re.DOTALL) is not None


IF_LINE = re.compile(r"^\s*(if|elif)\b(.*)$")
# a top-level `case "$SIZE" in` whose arms set variables: each arm a branch, as an `if` block's (its word the value)
CASE_LINE = re.compile(r"^\s*case\s+[\"']?\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?[\"']?\s+in\s*$")
CASE_ARM = re.compile(r"^\s*\(?\s*[\"']?([^()\s;\"']+)[\"']?\s*\)\s*(.*)$")
ESAC_LINE = re.compile(r"^\s*esac\b")
# a top-level `for NAME in A B C; do` over literal words: each item a branch (NAME=item)
FOR_LINE = re.compile(r"^\s*for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\s+([^;]*?)\s*(?:;\s*do\b.*)?$")
LITERAL_WORD = re.compile(r"[\w.@%+:,/=-]+")
MAX_LOOP_ITEMS = 8
ELSE_LINE = re.compile(r"^\s*else\b")
# [[ "$MODE" == "inference" ]], [ "${MODE}" = embedding ]: in the branch it guards, MODE has that value.
EQUALITY = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?[\"']?\s*==?\s*[\"']?([^\"'\s\]]+)")


def _equalities(test: str) -> dict[str, str]:
    """The names an `if` test compares with a literal word (`== "x"`); a glob pattern on the right of `[[ == ]]`
    (`[[ $EXTRA == *"tool-call-parser"* ]]`) matches many values and gives none."""
    found = {}
    for match in EQUALITY.finditer(test):
        word = re.match(r"[^\s\]]*", test[match.start(2):]).group(0)
        if not any(glob in word.replace("\\*", "") for glob in "*?["):
            found[match.group(1)] = match.group(2)
    return found


def branch_assignments(script: str, not_run: frozenset[int] = frozenset()) -> list[dict[str, str]]:
    """Per branch of each top-level `if` / `elif` / `else` block that assigns variables: the values it assigns
    (NAME=value, one word once split) over those its condition tests for equality (`[[ "$MODE" == "x" ]]`); a
    branch that assigns nothing, or whose lines the known values decide never run (`not_run`, line indexes), is
    left out, and so is adding on to a variable (NAME="$NAME --x") under a test of no equality (`-n "$X"`): an
    optional piece, and a name another branch of the block sets from a command's output. Nested blocks are not
    read."""
    branches: list[tuple[dict[str, str], dict[str, str], int]] = []  # (tested, assigned, block)
    unknowable: dict[int, set[str]] = {}  # per block: names a branch assigns a value not known here ($(cmd))
    depth, block = 0, 0
    case_of: str | None = None  # the variable a top-level `case "$X" in` tests, while in it
    in_loop = False  # in a top-level `for NAME in ITEMS` whose items are branches
    for index, text in enumerate(script.splitlines()):
        # a case arm's line split at its `;` (`small) MODEL=x; TP=1 ;;`)
        for line in (_statements(text.replace(";;", ";")) if case_of is not None and depth == 1 else (text,)):
            opened = IF_LINE.match(line)
            if case_of is not None and depth == 1:  # `small)  MODEL=x ;;`: an arm opens a branch
                arm = CASE_ARM.match(line)
                if arm and not ESAC_LINE.match(line):
                    pattern = arm.group(1)
                    branches.append(({case_of: pattern} if re.fullmatch(r"[\w.@%+:,/-]+", pattern) else {}, {}, block))
                    line = arm.group(2)
            if depth == 0 and (case := CASE_LINE.match(line)):
                block += 1
                depth, case_of = 1, case.group(1)
                continue
            loop = FOR_LINE.match(line) if depth == 0 else None
            items = loop.group(2).split() if loop else []
            if loop and 2 <= len(items) <= MAX_LOOP_ITEMS and all(LITERAL_WORD.fullmatch(i) for i in items):
                block += 1  # `for model in A B; do vllm serve $model ...`: one branch per item, the body's own
                branches += [({}, {loop.group(1): item}, block) for item in items]  # assignments belong to all
                depth, in_loop = 1, True
                continue
            if case_of is not None and depth == 1 and ESAC_LINE.match(line):
                depth, case_of = 0, None
                continue
            if opened and case_of is None and (depth == 0 and opened.group(1) == "if"
                                               or depth == 1 and opened.group(1) == "elif"):
                block += opened.group(1) == "if"
                branches.append((_equalities(opened.group(2)), {}, block))
                depth = 1
            elif depth == 1 and ELSE_LINE.match(line):
                branches.append(({}, {}, block))
            elif BLOCK_CLOSES.match(line):
                depth = max(depth - 1, 0)
                in_loop = in_loop and depth > 0
            elif BLOCK_OPENS.search(line) and depth > 0:
                depth += 1
            elif depth == 1 and branches and not in_loop and index not in not_run \
                    and (found := SCRIPT_ASSIGNMENT.match(line)):
                word = _one_word(found.group(2))
                adds_on = re.search(r"\$\{?" + found.group(1) + r"\b", found.group(2)) is not None
                if word is None:
                    unknowable.setdefault(block, set()).add(found.group(1))
                if word is not None and adds_on and not branches[-1][0]:
                    continue  # `[[ -n "$X" ]]` then ARGS="$ARGS --x $X": an optional piece, left out as `ARGS+=` is
                if word is not None:
                    assigned = branches[-1][1]
                    if found.group(1) in assigned:  # ARGS="$ARGS --more" again in the same branch: it adds on
                        (word,) = (t.text for t in expand_shell_variables([Token(word, None)],
                                                                          {found.group(1): assigned[found.group(1)]}))
                    assigned[found.group(1)] = word
    # a block where one branch's value is not known here (NUM_GPU=$(nvidia-smi -L | wc -l), else 0) gives no
    # variant for that name: the other branch's value alone would stand for a case nothing says is the one run
    kept = [(tested, {k: v for k, v in assigned.items() if k not in unknowable.get(at, ())})
            for tested, assigned, at in branches]  # fmt: skip
    return [tested | assigned for tested, assigned in kept if assigned]


def _one_word(value: str) -> str | None:
    if UNESCAPED_SUBSTITUTION.search(value):
        return None
    try:
        words = shlex.split(_without_comment(value)) or [""]
    except ValueError:
        return None
    return words[0] if len(words) == 1 else None


def _without_comment(value: str) -> str:
    """An assignment's value without the shell comment after it (`MODEL="m"   # the model`): a `#` that starts a
    word outside quotes begins a comment, one inside a word (`http://h/#x`) does not."""
    quote = None
    for at, char in enumerate(value):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or value[at - 1] in " \t"):
            return value[:at]
    return value


def expand_words(argv: list[Token], known: dict[str, str]) -> list[Token]:
    """The words as the shell runs them: variables expanded (expand_shell_variables), and an unquoted `$ARGS`
    whose value is a list of options split into its words, as the shell's word splitting does."""
    out: list[Token] = []
    for token, expanded in zip(argv, expand_shell_variables(argv, known)):
        value = expanded.text.strip()
        if SHELL_VARIABLE.fullmatch(token.text) and not value:
            continue  # a variable set to nothing: the shell's word splitting leaves no word ($tool_choice="")
        # `$ARGS` of options, or `exec $CMD` of a whole command (CMD="docker run ... IMAGE --model M"): split
        if out and out[-1].text == "eval" and SHELL_VARIABLE.search(token.text):  # eval re-reads its argument as a line
            out += expand_shell_variables([Token(w, token.line) for w in _split(value) if w != "&"], known)
            continue
        runs_it = all(word.text in COMMAND_PREFIXES for word in out) or _holds_a_command(value)
        if SHELL_VARIABLE.fullmatch(token.text) and (value.startswith("-") or runs_it) and len(value.split()) > 1:
            out += [Token(w, token.line) for w in (_split(value))]
        else:
            out.append(expanded)
    return out


COMMAND_PREFIXES = frozenset({"exec", "nohup", "setsid", "sudo", "time", "command", "eval"})
"""Words before a command that run it: a variable after them (or first) is the command itself."""
COMMAND_PROGRAMS = frozenset({"docker", "podman", "nerdctl", "vllm", "apptainer", "singularity", "srun", "mpirun",
                              "numactl", "taskset", "sh", "bash", "dash", "ash", "zsh"})
"""Programs whose command line a variable may hold (CMD="docker run ...", RUN="apptainer exec --nv IMAGE"): the
shell splits such a value into the words it runs, wherever the variable stands."""


def _split(value: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


CONDITIONAL_WORDS = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?\+([^{}]*)\}")
# `${VAR:?message}`: VAR's value, or the shell stops with the message (its words are never arguments)
REQUIRED_VALUE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?\?[^{}]*\}")


def conditional_words(script: str, known: dict[str, str]) -> tuple[str, list[str]]:
    """`${VAR:+--revision "$VAR"}`: the words when VAR is known and not empty, else nothing, each such option named
    in a note (it is set only when VAR is given at run time, unknown here: not judged)."""
    notes: list[str] = []

    def words(match: re.Match[str]) -> str:
        if known.get(match.group(1)):
            return match.group(2)
        notes.append(f"{match.group(2).strip()} only when ${match.group(1)} is set at run time, unknown here: "
                     "not judged")  # fmt: skip
        return ""

    return CONDITIONAL_WORDS.sub(words, script), notes


def _with_positionals(argv: list[Token], positionals: list[Token]) -> list[Token]:
    """`sh -c 'exec vllm serve "$@"' NAME ARG...`: the words after the script are $0 and then $1...; "$@" (or
    ${@}, $*) in the script's command stands for $1... (the `--` many write after a script is $0)."""
    expanded: list[Token] = []
    for token in argv:
        expanded += positionals if token.text in ("$@", "${@}", "$*", "${*}") else [token]
    return expanded


def runs_a_shell(command: list[Word], args: list[Word]) -> bool:
    """Whether the vLLM command is inside a `sh -c` script, where the shell expands $VAR and ${VAR}."""
    words = [token.text for token, _ in command + args]
    return bool(words) and PurePosixPath(words[0]).name in SHELLS and any(SHELL_COMMAND_OPTION.match(w) for w in words)


def expand_shell_variables(argv: list[Token], known: dict[str, str]) -> list[Token]:
    """$VAR, ${VAR} and ${VAR:-default} as the shell expands them from the container's literal env; others stay."""

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1) or match.group(2), match.group(3)
        if name in known and (known[name] or default is None):  # `:-` takes the default for an empty value too
            return known[name]
        if default is None:
            return match.group(0)
        # an empty default of a variable the manifest does not set (`${MODEL_NAME:-}`): the value is the runtime
        # environment's, unknown here, not an empty word
        return SHELL_VARIABLE.sub(value, default) or match.group(0)

    def arithmetic(match: re.Match[str]) -> str:
        result = evaluate_arithmetic(SHELL_VARIABLE.sub(value, match.group(1)), known)
        return str(result) if result is not None else match.group(0)

    def trimmed(match: re.Match[str]) -> str:
        name, operator, pattern = match.groups()
        if name not in known or UNRESOLVED.search(pattern):
            return match.group(0)
        return _trim(known[name], operator, pattern)

    def expanded(text: str) -> str:  # `${VAR:?message}` is VAR's value (the message only when it is unset)
        text = TRIMMED.sub(trimmed, REQUIRED_VALUE.sub(r"${\1}", text))
        return ARITHMETIC.sub(arithmetic, SHELL_VARIABLE.sub(value, text))

    return [replace(t, text=expanded(t.text)) for t in argv]


TRIMMED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(##?|%%?)([^{}]*)\}")
"""`${VAR#prefix}`, `${VAR%%suffix}`: the value less the shortest (#, %) or longest (##, %%) match of a pattern."""


def _trim(value: str, operator: str, pattern: str) -> str:
    """bash(1), "Remove matching prefix/suffix pattern": the pattern's * ? [...] as globs, quotes removed."""
    glob = fnmatch.translate(pattern.replace('"', "").replace("'", ""))[4:-3]
    ends = [i for i in range(len(value) + 1)
            if re.fullmatch(glob, value[:i] if operator[0] == "#" else value[i:], re.DOTALL)]  # fmt: skip
    if not ends:
        return value
    if operator[0] == "#":
        cut = max(ends) if operator == "##" else min(ends)
        return value[cut:]
    cut = min(ends) if operator == "%%" else max(ends)
    return value[:cut]


def evaluate_arithmetic(expression: str, known: dict[str, str]) -> int | None:
    """`LWS_GROUP_SIZE * DP_SIZE_LOCAL` as the shell's $((...)) computes it (integers, + - * / %, parentheses),
    when every name in it is known as an integer; None otherwise."""
    import ast

    text = ARITHMETIC_NAME.sub(lambda m: known.get(m.group(1), "?"), expression)
    if not re.fullmatch(r"[0-9\s+\-*/%()]+", text):
        return None
    try:
        tree = ast.parse(text.strip().replace("/", "//"), mode="eval").body
    except SyntaxError:
        return None
    return _integer(tree)


def _integer(node) -> int | None:
    import ast
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod}  # fmt: skip
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _integer(node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        left, right = _integer(node.left), _integer(node.right)
        if left is None or right is None or (right == 0 and type(node.op) in (ast.FloorDiv, ast.Mod)):
            return None
        return ops[type(node.op)](left, right)
    return None


def python_module_at(words: list[Token]) -> int | None:
    """Where the module of `python [options] -m MODULE` is in the words (python's own options such as -u skipped),
    or None when they do not start with a python that runs a module. A variable the script does not set (`$PY -m
    vllm.entrypoints...`, the interpreter of a site's environment) is a python when `-m` follows it."""
    if words and PurePosixPath(words[0].text).name == "torchrun":
        return _torchrun_module_at(words)
    if not words or not (PurePosixPath(words[0].text).name.startswith("python")
                         or UNRESOLVED.fullmatch(words[0].text)):  # $PY, or a `$(command -v python3)` it was set to
        return None
    index = 1
    while index < len(words) and words[index].text.startswith("-") and words[index].text != "-m":
        index += 2 if words[index].text in PYTHON_VALUE_OPTIONS else 1
    return index + 1 if index + 1 < len(words) and words[index].text == "-m" else None


# torchrun's switches (torch.distributed.run, torch 2.x `torchrun --help`); its other options take a value
TORCHRUN_SWITCHES = {"--standalone", "--no_python", "--no-python", "--run_path", "--run-path"}


def _torchrun_module_at(words: list[Token]) -> int | None:
    """Where the module of `torchrun [options] -m MODULE` is (torchrun starts a copy of it per process), or None."""
    index = 1
    while index < len(words) and words[index].text.startswith("-") and words[index].text not in ("-m", "--module"):
        option = words[index].text
        index += 1 if "=" in option or option in TORCHRUN_SWITCHES else 2
    return index + 1 if index + 1 < len(words) and words[index].text in ("-m", "--module") else None


def _after_launcher(words: list[Token]) -> list[Token] | None:
    index = 0
    while index < len(words) and (ASSIGNMENT.match(words[index].text)  # /usr/bin/env, /usr/bin/time: by name
                                  or PurePosixPath(words[index].text).name in (*PREFIX_WORDS, "timeout", *INIT_PROCESSES)):  # fmt: skip
        program = PurePosixPath(words[index].text).name
        index = _after_timeout(words, index) if program == "timeout" else \
            _after_init(words, index) if program in INIT_PROCESSES else \
            _after_env(words, index) if program == "env" else index + 1
    env = [w for w in words[:index] if ASSIGNMENT.match(w.text)]
    if index + 2 < len(words) and words[index].text.endswith(".sh") and (
            PurePosixPath(words[index + 1].text).name == "vllm" and words[index + 2].text == "serve"):
        index += 1  # `/launch-cluster.sh vllm serve MODEL ...`: a wrapper script given vLLM's command as its arguments
    rest = _after_runner(words[index:])
    if len(rest) >= 2 and (PurePosixPath(rest[0].text).name == "vllm" or TOOL_PIN.match(rest[0].text)
                           or VLLM_PROGRAM_VARIABLE.match(rest[0].text)) and rest[1].text == "serve":
        return env + rest[2:]
    extension = EXTENSION_PROGRAMS.get(PurePosixPath(rest[0].text).name) if len(rest) >= 2 else None
    if extension is not None and rest[1].text == "serve":  # `vllm-omni serve MODEL`: vLLM's serve with its options
        return env + _without_launcher_options(rest[2:], extension)
    module = python_module_at(rest)
    # the `vllm` command as a module; `python -m vllm serve` is found too, and refused as written (vLLM has no
    # __main__ module: scan/package_module.py)
    if module is not None and rest[module].text in ("vllm.entrypoints.cli.main", "vllm"):
        after = rest[module + 1 :]
        return env + after[1:] if after and after[0].text == "serve" else None  # bench, chat, run-batch: no server
    if module is not None and rest[module].text.startswith("vllm.entrypoints."):
        return env + rest[module + 1 :]
    if module is not None and rest[module].text in ENGINE_LAUNCHERS:
        return env + _without_launcher_options(rest[module + 1 :], ENGINE_LAUNCHERS[rest[module].text])
    translating = _translating_launcher_at(rest)
    if translating is not None:
        return env + translated(rest[translating[1] :], translating[0])
    wrapper = _wrapper_module(rest[module].text, rest[module + 1 :]) if module is not None else None
    if wrapper is not None:
        return env + _without_launcher_options(rest[module + 1 :], wrapper)
    return None


def _wrapper_module(module: str, argv: list[Token]) -> EngineLauncher | None:
    """Another project's module named for vLLM's server run with vLLM's serve flags (data/engine_launchers.yaml
    wrapper_modules), as a launcher whose own options are those no vLLM release has; None for any other module."""
    if not WRAPPER_MODULE.search(module) or not only_serve_flags([(token, None) for token in argv]):
        return None
    from kvdoctor.vllm_pack.candidates import all_serve_options

    known = all_serve_options()
    switches, valued = set(), set()
    for index, token in enumerate(argv):
        if not token.text.startswith("--") or canonical_option(token.text) in known:
            continue
        option = token.text.partition("=")[0]
        following = argv[index + 1].text if index + 1 < len(argv) else "-"
        (valued if "=" in token.text or not following.startswith("-") else switches).add(option)
    return EngineLauncher(module, WRAPPER_NAME, frozenset(switches), frozenset(valued), frozenset())


def _translating_launcher_at(words: list[Token]) -> tuple[TranslatingLauncher, int] | None:
    """The server that translates its options into vLLM's the words start with (`trl vllm-serve`, `python -m
    trl.scripts.vllm_serve`), and where its options start."""
    module = python_module_at(words)
    for launcher in TRANSLATING_LAUNCHERS:
        if module is not None and words[module].text == launcher.module:
            start = module + 1
        elif len(words) >= len(launcher.program) and PurePosixPath(words[0].text).name == launcher.program[0] and (
                tuple(w.text for w in words[1 : len(launcher.program)]) == launcher.program[1:]):
            start = len(launcher.program)
        else:
            continue
        if requirements_met(words[start:], launcher):
            return launcher, start
    return None


def translating_launcher_words(words: list[Token]) -> str | None:
    """'trl vllm-serve' or 'python -m trl.scripts.vllm_serve' as the command writes it, when it runs such a server."""
    for start in range(len(words)):
        found = _translating_launcher_at(words[start:])
        if found is not None:
            return " ".join(PurePosixPath(w.text).name if i == 0 else w.text
                            for i, w in enumerate(words[start : start + found[1]]))  # fmt: skip
    return None


VLLM_PROGRAM_VARIABLE = re.compile(r"^\$\{?[A-Za-z_]*VLLM_?(?:BIN|BINARY|EXE|EXEC|PATH|CLI|CMD)\}?$", re.IGNORECASE)
"""A variable a script set to the vllm program where kvdoctor cannot follow it (`VLLM_BIN="$(command -v vllm)"` in
an `if`), run as `"$VLLM_BIN" serve MODEL`: vLLM's serve all the same."""
INIT_PROCESSES = {"dumb-init", "tini", "tini-static", "catatonit", "docker-init"}
"""A container's init (an ENTRYPOINT ["dumb-init", "--"] before the CMD): it runs the words after its options."""
INIT_VALUE_OPTIONS = {"-r", "--rewrite", "-e", "-p", "-l"}
TIMEOUT_VALUE_OPTIONS = {"-s", "--signal", "-k", "--kill-after"}


def _after_init(words: list[Token], index: int) -> int:
    """The index of the command an init process runs (`dumb-init -- CMD`, `tini -g -- CMD`)."""
    index += 1
    while index < len(words) and words[index].text.startswith("-"):
        if words[index].text == "--":
            return index + 1
        index += 2 if words[index].text in INIT_VALUE_OPTIONS else 1
    return index


def _after_env(words: list[Token], index: int) -> int:
    """The index after `env`'s options (-i, -u NAME, -C DIR, --) and the arrays of NAME=VALUE words a script passes it
    (`env "${env[@]}" vllm serve ...`): the assignments that follow are skipped by the caller."""
    index += 1
    while index < len(words) and (words[index].text.startswith("-") or ENV_ARRAY.match(words[index].text)):
        index += 2 if words[index].text in ENV_VALUE_OPTIONS else 1
    return index


ENV_VALUE_OPTIONS = {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}
ENV_ARRAY = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\[[@*]\]\}$")


def _after_timeout(words: list[Token], index: int) -> int:
    """The index of the command `timeout [OPTION] DURATION COMMAND` runs (coreutils timeout(1))."""
    index += 1
    while index < len(words) and words[index].text.startswith("-"):
        index += 2 if words[index].text in TIMEOUT_VALUE_OPTIONS else 1
    return index + 1  # the duration


def engine_launcher(words: list[Token]) -> EngineLauncher | None:
    """The engine launcher (`python -m dynamo.vllm`, or a wrapper module named for vLLM's server) the command runs,
    if any."""
    for start in range(len(words)):
        module = python_module_at(words[start:])
        if module is not None and words[start + module].text in ENGINE_LAUNCHERS:
            return ENGINE_LAUNCHERS[words[start + module].text]
        if module is not None and _translating_launcher_at(words[start:]) is None:
            wrapper = _wrapper_module(words[start + module].text, words[start + module + 1 :])
            if wrapper is not None:
                return wrapper
    return None


def _after_runner(words: list[Token]) -> list[Token]:
    """The words after `uv run` / `poetry run` / `conda run -n ENV` / a tool runner (`uvx`, `uv tool run`, `pipx
    run`) and the runner's options, or after `ray job submit ... --` (the words themselves when they start with no
    runner)."""
    program = PurePosixPath(words[0].text).name if words else ""
    texts = [w.text for w in words[:3]]
    if program in PROFILERS:  # `nsys profile -t cuda -o run vllm serve M`: its options end where vLLM starts
        start = next((i for i, w in enumerate(words[1:MAX_PROFILER_WORDS], 1)
                      if PurePosixPath(w.text).name == "vllm" or PurePosixPath(w.text).name.startswith("python")),
                     None)  # fmt: skip
        return words[start:] if start is not None else words
    if program == "ray" and texts[1:3] == ["job", "submit"]:  # `ray job submit [OPTIONS] -- ENTRYPOINT...`
        separator = next((i for i, w in enumerate(words[3:], 3) if w.text == "--"), None)
        return words[separator + 1 :] if separator is not None else words
    if program == "uvx":
        index = 1
    elif program == "uv" and texts[1:3] == ["tool", "run"]:
        index = 3
    elif program == "pipx" and texts[1:2] == ["run"]:
        index = 2
    elif len(words) >= 2 and program in RUNNERS and words[1].text == "run":
        index = 2
    else:
        return words
    while index < len(words) and words[index].text.startswith("-"):
        index += 2 if words[index].text in RUNNER_VALUE_OPTIONS else 1
    return words[index:]


def without_launcher_options(argv: list[Token], launcher: EngineLauncher) -> list[Token]:
    """The words without the launcher's (or an image's extension's) own options and their values."""
    return _without_launcher_options(argv, launcher)


def _without_launcher_options(argv: list[Token], launcher: EngineLauncher) -> list[Token]:
    """The launcher's words without its own options (and their values): what is left are vLLM's engine args."""
    kept: list[Token] = []
    index = 0
    while index < len(argv):
        option = argv[index].text.partition("=")[0]
        if not launcher.owns(option):
            kept.append(argv[index])
            index += 1
            continue
        index += 1
        if option in launcher.valued and "=" not in argv[index - 1].text:
            index += 1
        elif option in launcher.many:
            while index < len(argv) and not argv[index].text.startswith("-"):
                index += 1
    return kept


def _in_script(script: Token, node: yaml.Node | None, source_text: str) -> list[Token] | None:
    flat = _flat_commands(script.text)
    lexer = shlex.shlex(flat, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""  # comments are blanked line by line: on the flattened script one would swallow the rest
    try:
        words = whole_substitutions(list(lexer))
    except ValueError:
        return None
    placed = _place(words, node, source_text) if node is not None else _place_in(words, script.text, script.line or 1)
    if "=(" in script.text:  # `ARGS=(...); vllm serve m "${ARGS[@]}"` inside the one string
        placed = expand_arrays(placed, script_arrays(script.text, script.line or 1))
    segment: list[Token] = []
    positionals: list[Token] | None = None  # what `set -- WORDS` made "$@", once the script sets it
    for word in placed + [Token(";", None)]:
        if word.text in OPERATORS or (word.text and set(word.text) <= set(";&|")):  # "&;": `cmd &` ends its line
            if positionals is not None:
                segment = _with_positionals(segment, positionals)
            if [w.text for w in segment[:2]] == ["set", "--"]:  # `set -- serve "$MODEL" ...; exec vllm "$@"`
                positionals = segment[2:]
            else:
                found = _after_launcher(segment)
                if found is not None:
                    return found
            segment = []
        else:
            segment.append(word)
    return None


def _flat_commands(script: str) -> str:
    """The script as one line of commands: comments and redirections blanked, here-document bodies emptied,
    continuations made spaces, newlines made `;` (its words are placed by searching the original script)."""
    flat = _without_heredoc_bodies(_without_comments(script)).replace("\\\n", "  ").replace("\n", ";")
    # `${VAR:+--flag "$VAR" --other}`: words passed only when VAR is set at run time, kept as one unknown word
    flat = CONDITIONAL_WORDS.sub(lambda m: "${" + m.group(1) + ":+...}", flat)
    flat = REQUIRED_VALUE.sub(lambda m: "${" + m.group(1) + "}", flat)
    if re.search(r"(?<!\\)(?:\\\\)*\\$", flat):  # a continuation on the last line continues into nothing
        flat = flat[:-1] + " "
    return REDIRECTION.sub(lambda m: " " * len(m.group(0)), flat)


def whole_substitutions(words: list[str]) -> list[str]:
    """The lexer's words with each $(command) / $((arithmetic)) the spaces inside it split joined back into one
    word (`$((LWS_GROUP_SIZE * DP_SIZE_LOCAL))` is one argument to the shell)."""
    joined: list[list[str]] = []
    depth = 0  # parentheses still open in the word being joined (counted per piece: a long script stays linear)
    for word in words:
        if depth > 0:
            joined[-1].append(word)
        else:
            joined.append([word])
            depth = 0
        if depth > 0 or "$(" in word:
            depth += word.count("(") - word.count(")")
    return [" ".join(pieces) for pieces in joined]


@dataclass(frozen=True)
class Heredoc:
    """One here-document of a script."""

    opener: str
    """The line that opens it (`cat <<EOF > x.yaml`, `ssh host bash <<'EOF'`)."""
    first_line: int
    """The 1-based line of its body's first line."""
    body: str
    quoted: bool
    """Whether its delimiter is quoted (<<'EOF'): the body is taken as written, no expansion."""


def heredocs(script: str) -> list[Heredoc]:
    """Each here-document of the script, in order."""
    found: list[Heredoc] = []
    lines = script.split("\n")
    index = 0
    while index < len(lines):
        opened = HEREDOC.search(lines[index])
        index += 1
        if opened is None:
            continue
        start = index
        while index < len(lines) and lines[index].strip() != opened.group(2):
            index += 1
        found.append(Heredoc(lines[start - 1], start + 1, "\n".join(lines[start:index]), bool(opened.group(1))))
        index += 1
    return found


def heredoc_bodies(script: str) -> list[tuple[int, str]]:
    """Each here-document's body (`cat <<EOF > x.yaml` ... `EOF`) with the 1-based line it starts on."""
    return [(heredoc.first_line, heredoc.body) for heredoc in heredocs(script)]


def _without_heredoc_bodies(script: str) -> str:
    """The script with each here-document's body (and its closing word) emptied: data, not commands (words are
    placed by searching the original script, so the lines need not keep their length: a 1.7 MB manifest in a
    heredoc is not lexed space by space)."""
    lines = script.split("\n")
    for start, body in heredoc_bodies(script):
        for at in range(start - 1, min(start + body.count("\n") + 1, len(lines))):
            lines[at] = ""
        if start - 1 + body.count("\n") + 1 < len(lines):
            lines[start + body.count("\n")] = ""
    return "\n".join(lines)


def _without_comments(script: str) -> str:
    """The script with each comment (a # at a word's start, outside quotes, to the end of its line) blanked, so
    that every offset still indexes the original."""
    lines = []
    for line in script.split("\n"):
        if "#" not in line:
            lines.append(line)
            continue
        quote, cut = None, None
        for at, char in enumerate(line):
            if quote:
                quote = None if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "#" and (at == 0 or line[at - 1] in " \t;"):
                cut = at
                break
        lines.append(line if cut is None else line[:cut] + " " * (len(line) - cut))
    return "\n".join(lines)


def script_commands(script: str, first_line: int) -> list[list[Token]]:
    """Every simple command of a shell script (split at newlines, ;, &&, ||, |, &), each word on its line."""
    flat = _flat_commands(script)
    lexer = shlex.shlex(flat, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        words = whole_substitutions(list(lexer))
    except ValueError:
        return []
    commands: list[list[Token]] = [[]]
    for word in _place_in(words, script, first_line):
        if word.text in OPERATORS or (word.text and set(word.text) <= set(";&|")):
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def tool_pin(words: list[Token]) -> tuple[str, Token] | None:
    """The vLLM release a tool runner installs to run the command (`uvx vllm@0.11.0 serve`, `--from vllm==X`), and
    the word that pins it."""
    runner = False
    for word in words:
        if word.text == "serve":
            return None
        runner = runner or PurePosixPath(word.text).name in ("uvx", "uv", "pipx")
        found = TOOL_PIN.match(word.text) if runner else None
        if found:
            return found.group(1), word
    return None


def after_launcher(words: list[Token]) -> list[Token] | None:
    """The argv after `vllm serve` / `python -m vllm.entrypoints...` (VAR=value and exec/nohup prefixes kept
    out of the way), or None."""
    return _after_launcher(words)


def _place(words: list[str], node: yaml.Node, source_text: str) -> list[Token]:
    """Give each word the line it is written on, found in the node's source text in order."""
    start = node.start_mark
    text = start.buffer if isinstance(start.buffer, str) else source_text  # a node of a Kustomize patch: its own file
    raw = text[start.index : node.end_mark.index] if text else ""
    return _place_in(words, raw, start.line + 1)


NEXT_WORD_LINES = 2
"""How many written lines (not blank, not a comment) a word's first part may lie past the last word placed."""


def _near(raw: str, word: str, cursor: int) -> int:
    """Where ``word`` is next written from ``cursor`` on, within NEXT_WORD_LINES written lines; -1 when not there."""
    found = raw.find(word, cursor)
    if found < 0:
        return -1
    between = raw[cursor:found].split("\n")[1:]
    written = sum(1 for line in between if line.strip() and not line.lstrip().startswith("#"))
    return found if written <= NEXT_WORD_LINES else -1


def _place_in(words: list[str], raw: str, first_line: int) -> list[Token]:
    """Each word with its line: found in order in ``raw``, whose first line is ``first_line``. A word is looked for
    near the last one placed (`IFS=','`, read as `IFS=,`, is not the `$(IFS=,; ...)` thirty lines down); after
    LOST_AFTER words in a row not found there, anywhere further on."""
    placed: list[Token] = []
    cursor = missed = 0
    for word in words:
        if word and set(word) <= set(";&|"):  # an operator, perhaps a newline the flattening turned into `;`
            placed.append(Token(word, first_line + raw[:cursor].count("\n")))
            continue
        found, length = -1, 0
        for part in _written_parts(word):
            found = raw.find(part, cursor) if missed >= LOST_AFTER else _near(raw, part, cursor)
            if found >= 0:
                length = len(part)
                break
        if found < 0:
            missed += 1
            placed.append(Token(word, first_line + raw[:cursor].count("\n")))
            continue
        missed = 0
        placed.append(Token(word, first_line + raw[:found].count("\n")))
        cursor = found + length
    return placed


LOST_AFTER = 2


def _written_parts(word: str) -> list[str]:
    """What of a word the text holds as written, longest first: the word; a word the shell unquoted (VAR="a b" ->
    VAR=a b, VAR="$x" -> VAR=$x) up to its first space or quote, and an assignment up to its `=`."""
    if not word:
        return []
    parts = [word]
    head = re.split(r"[\s'\"]", word, maxsplit=1)[0]
    if len(head) >= 2 and head != word:
        parts.append(head)
    name = word.partition("=")[0] + "="
    if "=" in word and len(name) >= 3 and name not in parts:
        parts.append(name)
    return parts


def without_unresolved(argv: list[Token]) -> tuple[list[Token], list[str]]:
    """The argv without the flags whose value is a variable the manifest does not set ($VAR, ${VAR}, $(VAR)) and
    without words that are such a variable alone after the model ($EXTRA_ARGS), each named in a note: their values
    are unknown here, so they are not judged (a guess would be a false error). The model stays, said unknown."""
    kept: list[Token] = []
    notes: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        nxt = argv[index + 1] if index + 1 < len(argv) else None
        flag, inline, value = token.text.partition("=")
        if flag.startswith("-") and UNRESOLVED.search(flag):
            # an option whose very name a variable gives (`"--${arg_name}" "$value"`, built in a loop over the
            # environment): which option it is, is unknown here; a value word after it goes with it
            notes.append(f"{flag} (an option named by a variable) is unknown here: not judged")
            index += 2 if not inline and nxt is not None and not nxt.text.startswith("-") else 1
            continue
        is_flag = token.text.startswith("-") and canonical_option(token.text) != "--model"
        takes_next = (is_flag and not inline and nxt is not None and UNRESOLVED.search(nxt.text) is not None
                      and not nxt.text.startswith("-") and takes_a_value(canonical_option(token.text)))  # fmt: skip
        variable = UNRESOLVED.search(value if inline else nxt.text if takes_next else "")
        if is_flag and variable and _refused_whatever_its_value(canonical_option(flag), bool(inline)):
            kept.append(token)  # no release has the option, or a switch given `=value`: refused whatever the value
            index += 1
            continue
        if is_flag and variable:
            notes.append(f"{flag} takes its value from {variable.group(0)}, unknown here: not judged")
            index += 1 if inline else 2
            # an option of many values (--served-model-name A B) takes the words after the variable too
            while (not inline and index < len(argv) and not argv[index].text.startswith("-")
                   and takes_many(canonical_option(token.text))):
                index += 1
            continue
        positional = not token.text.startswith("-") and not ASSIGNMENT.match(token.text)
        # a variable word after the model, or (not a flag's value) beside a --model flag: arguments the environment
        # supplies
        after_flag = index > 0 and argv[index - 1].text.startswith("-") and "=" not in argv[index - 1].text
        if positional and UNRESOLVED.fullmatch(token.text) and (any(_is_positional(t, kept) for t in kept) or (
                not after_flag and any(canonical_option(t.text) == "--model" for t in argv))):
            notes.append(f"{token.text} (arguments the manifest leaves to the environment) is unknown here: not judged")
            index += 1
            continue
        kept.append(token)
        index += 1
    return kept, notes


def _refused_whatever_its_value(option: str, inline: bool) -> bool:
    """Whether every parser the pack read refuses the option whatever value a variable gives it: no release has it
    (--max-num-chunked-tokens), or it is a switch in every release that has it, written `--x=$(VAR)`."""
    specs = _option_specs(option)
    if not specs:
        from kvdoctor.vllm_pack.candidates import all_serve_options

        return option not in all_serve_options() and not any(o.startswith(option) for o in all_serve_options())
    return inline and all(not getattr(spec, "takes_value", True) or getattr(spec, "nargs", None) == 0 for spec in specs)


def takes_a_value(option: str) -> bool:
    """Whether a serve option takes a value in some release the pack read (an unknown option: assumed to)."""
    specs = _option_specs(option)
    return not specs or any(getattr(spec, "takes_value", True) for spec in specs)


def takes_many(option: str) -> bool:
    """Whether a serve option takes every word up to the next option (nargs + or *) in some release the pack read."""
    return any(getattr(spec, "nargs", None) in ("+", "*") for spec in _option_specs(option))


def _option_specs(option: str) -> list:
    """The option's spec in each release the pack read that has it."""
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.store import pack_releases

    return [spec for v in pack_releases() if (spec := load_release(v).serve_args.get(option)) is not None]


def _is_positional(token: Token, before: list[Token]) -> bool:
    """Whether a kept word is the model positional (not a flag, not a flag's value, not a VAR=value prefix)."""
    at = before.index(token)
    previous = before[at - 1].text if at else ""
    follows_flag = previous.startswith("-") and "=" not in previous
    return not token.text.startswith("-") and not ASSIGNMENT.match(token.text) and not follows_flag
