"""Shell scripts -> vLLM workloads: each `docker run` / `podman run` of an image that runs vLLM's server (or whose
command is `vllm serve`), and each `vllm serve` / `python -m vllm.entrypoints...` run directly (after `srun` and
its options too). Words keep their lines; the script's plain top-level assignments are expanded."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import replace
from pathlib import Path, PurePosixPath

from kvdoctor.data.engine_launchers import EngineLauncher
from kvdoctor.scan import cloud_run, compose_up, process_env, slurm_jobs
from kvdoctor.scan.assigned_commands import unwrapped_assignments
from kvdoctor.scan.built_images import Build, Deploy, built_workload, image_builds, roots_of
from kvdoctor.scan.command import (ASSIGNMENT, FLAGS_ONLY_NOTE, RAY_START, SHELL_COMMAND_OPTION, SHELL_VARIABLE, SHELLS,
                                  after_launcher, branch_assignments, decided_lines, engine_launcher,
                                  expand_shell_variables, expand_words, heredocs, only_serve_flags, script_assignments,
                                  script_commands, serve_argv, tool_pin, translating_launcher_words)  # fmt: skip
from kvdoctor.scan.documents import JOB_SCRIPT_SUFFIXES, SCRIPT_SUFFIXES, SourceFile, reads_as_shell
from kvdoctor.scan.image import is_vllm_build, runs_vllm_entrypoint
from kvdoctor.scan.image_entrypoints import names_vllm, unread_release, unseen_note
from kvdoctor.scan.kubernetes import env_built
from kvdoctor.scan.shell_arrays import expand_arrays, script_arrays
from kvdoctor.scan.shell_functions import (ShellFunction, called_body, functions_in, sourced_functions, with_arguments,
                                          without_bodies)
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

SHEBANG = re.compile(r"^#!\s*\S*(?:/|env\s+)(?:ba|da|z)?sh\b")
CONTAINER_RUNNERS = {"docker", "podman", "nerdctl"}
WRAPPERS = {"sudo", "srun", "apptainer", "singularity", "shifter"}
"""Commands that run the rest of their words (after their own options): `sudo docker run`, `srun -p X vllm serve`,
`apptainer exec --nv --bind /data vllm-openai.sif vllm serve ...` (its subcommand and image skipped too)."""
CONTAINER_EXEC = {"apptainer", "singularity"}
SHIFTER_VALUE_OPTIONS = {"--image", "-i", "--volume", "-V", "--env", "-e", "--module", "-m", "--workdir", "-w",
                         "--env-file"}  # fmt: skip
"""NERSC's Shifter (`shifter [--image=IMG] [options] COMMAND...`, NERSC's docs): options that take a value."""
EXEC_VALUE_OPTIONS = {"-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys"}
"""`docker exec` / `podman exec` options that take a value (docs.docker.com/reference/cli/docker/container/exec)."""
PLAIN_PREFIXES = {"exec", "nohup", "setsid", "time"}
"""Words that run the rest of the line as it is, without options of their own here."""
ENV_RUNNERS = {"dotenvx", "dotenv", "doppler", "op", "infisical", "chamber", "aws-vault", "teller", "sops"}
"""Commands that set the environment (a .env file, a secrets manager) and run the words after their `--`:
`dotenvx run -- apptainer run ...`, `doppler run -- vllm serve ...`, `op run -- ...`, `infisical run -- ...`,
`aws-vault exec PROFILE -- ...`, `sops exec-env FILE -- ...`."""
CONDITION_KEYWORDS = {"if", "elif", "while", "until", "!", "then", "do", "else"}
"""Words before a command that a shell tests or runs in a block (`if main; then`): the command runs all the same."""
# apptainer / singularity exec options that take a value (apptainer 1.x `exec --help`); the others are switches
CONTAINER_EXEC_VALUE_OPTIONS = {
    "-B", "--bind", "--env", "--env-file", "-H", "--home", "-W", "--workdir", "--mount", "-o", "--overlay", "--pwd",
    "--security", "--network", "--network-args", "--app", "--no-mount", "-S", "--scratch", "--hostname", "--fusemount",
    "--dns", "--add-caps", "--drop-caps", "--apply-cgroups", "--cpus", "--cpu-shares", "--cpuset-cpus", "--cpuset-mems",
    "--memory", "--memory-reservation", "--memory-swap", "--pids-limit", "--blkio-weight", "--blkio-weight-device",
    "--pem-path", "--docker-host", "--cwd",
}
POWERSHELL_CONTINUATION = re.compile(r"`[ \t]*\r?\n")
# docker run options that take a value as the next word (the others are switches): every value option of
# `docker run --help` (Docker 27, docs.docker.com/reference/cli/docker/container/run) and podman run's own
DOCKER_VALUE_OPTIONS = {
    "-a", "--attach", "--add-host", "--annotation", "--blkio-weight", "--blkio-weight-device", "--cap-add",
    "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "-c", "--cpu-count", "--cpu-percent", "--cpu-period",
    "--cpu-quota", "--cpu-rt-period", "--cpu-rt-runtime", "--cpu-shares", "--cpus", "--cpuset-cpus", "--cpuset-mems",
    "--device", "--device-cgroup-rule", "--device-read-bps", "--device-read-iops", "--device-write-bps",
    "--device-write-iops", "--dns", "--dns-option", "--dns-opt", "--dns-search", "--domainname", "--entrypoint", "-e",
    "--env", "--env-file", "--expose", "--gpus", "--group-add", "--health-cmd", "--health-interval",
    "--health-retries", "--health-start-interval", "--health-start-period", "--health-timeout", "-h", "--hostname",
    "--io-maxbandwidth", "--io-maxiops", "--ip", "--ip6", "--ipc", "--isolation", "--kernel-memory", "-l", "--label",
    "--label-file", "--link", "--link-local-ip", "--log-driver", "--log-opt", "--mac-address", "-m", "--memory",
    "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount", "--name", "--net", "--net-alias",
    "--network", "--network-alias", "--oom-score-adj", "--pid", "--pids-limit", "--platform", "-p", "--publish",
    "--pull", "--restart", "--runtime", "--security-opt", "--shm-size", "--stop-signal", "--stop-timeout",
    "--storage-opt", "--sysctl", "--tmpfs", "--ulimit", "-u", "--user", "--userns", "--uts", "-v", "--volume",
    "--volume-driver", "--volumes-from", "-w", "--workdir",
    # podman run's own
    "--hooks-dir", "--arch", "--os", "--variant", "--pod", "--secret", "--tz", "--umask", "--uidmap", "--gidmap",
    "--subuidname", "--subgidname", "--sdnotify", "--log-level", "--requires", "--chrootdirs", "--passwd-entry",
}  # fmt: skip
# docker run's switches (docs.docker.com/reference/cli/docker/container/run), short ones combinable (-dit)
DOCKER_SWITCHES = {"-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "--privileged", "--init", "-P",
                   "--publish-all", "--read-only", "--sig-proxy", "--no-healthcheck", "--oom-kill-disable", "-q",
                   "--quiet", "--disable-content-trust"}  # fmt: skip
SHORT_SWITCHES = re.compile(r"^-[dit]+$")
# srun options that take a value as the next word (short ones; long ones are written --opt=value).
# A vLLM (or python) executable inside an environment named for its release: a conda env or venv such as
# /home/u/miniconda3/envs/vllm-0.9.0/bin/vllm or ~/venvs/vllm_0.10.1/bin/python; read as that release.
ENV_NAMED_RELEASE = re.compile(r"(?:^|/)vllm[-_=]v?([0-9]+\.[0-9]+(?:\.[0-9]+)?(?:\.post[0-9]+)?)/bin/[^/]+$")
SRUN_VALUE_OPTIONS = {"-p", "-n", "-N", "-c", "-t", "-J", "-A", "-q", "-w", "-x", "-o", "-e", "-G", "-D", "-C",
                      "--gres", "--partition", "--job-name", "--account", "--time", "--nodes", "--ntasks",
                      "--cpus-per-task", "--gpus", "--quotatype", "--ntasks-per-node", "--mem", "--qos"}  # fmt: skip


def is_shell_script(source: SourceFile) -> bool:
    from kvdoctor.scan.ansible_templates import rendered_name  # a rendered `serve.sh.j2` is a script too

    return rendered_name(source.path).endswith(SCRIPT_SUFFIXES + JOB_SCRIPT_SUFFIXES) or bool(SHEBANG.match(source.text)) \
        or ("." not in PurePosixPath(source.path).name and reads_as_shell(source.text))


def read(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """A script file's workloads and the notes on what it deploys with a command kvdoctor cannot see."""
    text = source.text.replace("\r\n", "\n")  # a script saved with Windows line ends, read as written
    if source.path.endswith(".ps1"):  # PowerShell continues a line with a backtick where a shell has a backslash
        text = POWERSHELL_CONTINUATION.sub("\\\n", text)
    job = slurm_jobs.job_of(text) if "#SBATCH" in text else None
    found, notes = script_findings(text, 1, source.path, PurePosixPath(source.path).name,
                                   job.environment() if job else None)
    found = process_env.inherited(found, process_env.exported(text, 1, job.environment() if job else None))
    return ([_on_slurm_node(w, job) for w in found] if job else found), notes


def _on_slurm_node(workload: Workload, job: slurm_jobs.SlurmJob) -> Workload:
    """A one-node job's workload gets the GPUs the directives give it (vLLM can use no others); any job's workload
    the GPU type they ask for."""
    if job.image is not None and workload.image is None and workload.container == "shifter":
        workload = replace(workload, image=job.image[0], image_line=job.image[1],
                           notes=tuple(n for n in workload.notes if n != UNKNOWN_RELEASE_NOTE)
                           + (f"Shifter runs the job's image (#SBATCH --image, line {job.image[1]})",))
    if job.gpu_type is not None and not workload.gpu_selectors:
        name, line = job.gpu_type
        workload = replace(workload, gpu_selectors=(GpuSelector(slurm_jobs.GPU_TYPE_KEY, (name,), line),))
    if workload.gpu_limit is not None or job.gpus_per_node is None or job.nodes not in (None, 1):
        return workload
    note = f"Slurm job: #SBATCH line {job.line} gives the one node {job.gpus_per_node} GPU(s)"
    return replace(workload, gpu_limit=job.gpus_per_node, gpu_limit_line=job.line, notes=workload.notes + (note,))


def script_workloads(script: str, first_line: int, file: str, name: str, env: dict[str, str] | None = None,
                     builds: list[Build] | None = None) -> list[Workload]:  # fmt: skip
    return script_findings(script, first_line, file, name, env, builds)[0]


def unseen_commands(script: str, first_line: int, file: str, env: dict[str, str] | None = None,
                    builds: list[Build] | None = None) -> list[str]:  # fmt: skip
    return script_findings(script, first_line, file, "", env, builds)[1]


def script_builds(script: str, first_line: int, env: dict[str, str] | None = None) -> list[Build]:
    """The images a script builds (`docker build -t TAG ...`), their words expanded from its assignments."""
    if "build" not in script:
        return []
    known = script_assignments(script, dict(env or {}))
    return image_builds([expand_words(words, known) for words in script_commands(script, first_line)])


def script_findings(script: str, first_line: int, file: str, name: str, env: dict[str, str] | None = None,
                    builds: list[Build] | None = None, depth: int = 0,
                    outer: dict[str, ShellFunction] | None = None,
                    outer_arrays: dict[str, list[Token]] | None = None) -> tuple[list[Workload], list[str]]:  # fmt: skip
    """The workloads of a shell script whose first line is `first_line` of `file`, its words expanded from its
    top-level assignments (and `env`), and notes for its commands that deploy vLLM with a command kvdoctor cannot
    see (`gcloud run deploy vllm-svc --image IMAGE` of an image built elsewhere). A command whose variables an `if` /
    `elif` branch sets is one workload per such branch (`VLLM_ARGS=...` per `$VLLM_MODE`), each with the branch's
    values and a note saying which. `outer`: the functions of the script a function's body (read here) belongs to;
    `outer_arrays`: the arrays that script assigned (`vllm "${ARGS[@]}"` in a function, ARGS=(serve ...) above it)."""
    own = _functions(script, file, depth)
    functions = ((outer or {}) | own) if depth < MAX_CALL_DEPTH else {}
    called = _called_functions(script, first_line, functions)
    defined_here = {name for name in called if name in own}
    script = without_bodies(script, own, defined_here) if defined_here else script  # they run where they are called
    known = script_assignments(script, dict(env or {}))
    builds = (builds or []) + script_builds(script, first_line, env)  # an image built here, deployed below
    script = alternate_values(script, known)
    not_run = frozenset(index for index, _, runs in decided_lines(script, known) if False in runs)
    branches = branch_assignments(script, not_run)
    arrays = (outer_arrays or {}) | (script_arrays(script, first_line, not_run) if "=(" in script else {})
    look_unseen = "vllm" in script.lower()  # a note names a service or image named for vLLM
    found: list[Workload] = []
    notes: list[str] = []
    installed: tuple[str, Token] | None = None  # the last `pip install vllm==X` run so far
    for words in script_commands(unwrapped_assignments(script), first_line):  # ID=$(docker run ...) runs it
        words = expand_arrays(words, arrays)
        words = _tested(words)  # `if main; then`, `! start_vllm`: the command tested runs all the same
        installed = pip_installed_release(expand_words(words, known)) or installed
        if words and words[0].text in called:  # `start_vllm "$MODEL" 8000`: the function's body with these arguments
            inner, inner_notes = _function_call(functions[words[0].text], expand_words(words, known), first_line, file,
                                                name, known, depth, functions, arrays)  # fmt: skip
            found += [w for w in inner if not any(_same(w, other) for other in found)]
            notes += inner_notes
            continue
        expanded_words = expand_words(words, known)
        run_file = _called_script_file(expanded_words, file) if depth < MAX_CALL_DEPTH else None
        if run_file is not None:  # `exec bash ~/repo/scripts/launch_server.sh NAME MODEL --flag`: that file, these args
            path, text, prefix_env = run_file
            inner, inner_notes = script_findings(text, 1, str(path), name, known | prefix_env, depth=depth + 1)
            note = f"{path.name}, run by {PurePosixPath(file).name} with its arguments, is read with them"
            _, wrapper, contained = _unwrap(expanded_words)
            if contained is not None:  # run inside a container image (apptainer exec IMG ./start.sh): that image's
                inner = [replace(w, image=w.image or contained[1].text, container=wrapper or w.container) for w in inner]
            found += [replace(w, notes=w.notes + (note,), read_through=w.read_through + (str(path),)) for w in inner
                      if not any(_same(w, other) for other in found)]  # fmt: skip
            notes += inner_notes
            continue
        started = compose_up.compose_files(expanded_words, file) if file not in ("", "<stdin>") else None
        if started:  # `docker compose -f docker-compose.yml up -d`: the project's services, with this script's values
            found += [w for path in started for w in compose_up.workloads(path, known, file)
                      if not any(_same(w, other) for other in found)]  # fmt: skip
            continue
        inline = _shell_string(words)
        if inline is not None:  # `bash -c '...'` (nohup, ssh, a supervisord program): the string is a script
            inner, inner_notes = script_findings(inline.text, inline.line or first_line, file, name, known,
                                                 depth=depth + 1, outer=functions, outer_arrays=arrays)  # fmt: skip
            found += [w for w in inner if not any(_same(w, other) for other in found)]
            notes += inner_notes
            if inner:
                continue
        typed = _typed_keys(words)
        if typed is not None and SHELL_VARIABLE.fullmatch(typed.text):  # `send-keys "$CMD" C-m`: the script it holds
            (typed,) = expand_shell_variables([typed], known)
        if typed is not None:  # `tmux send-keys -t S "vllm serve ..." C-m`: a command typed into a shell
            inner, inner_notes = script_findings(typed.text, typed.line or first_line, file, name, known)
            found += [w for w in inner if not any(_same(w, other) for other in found)]
            notes += inner_notes
            continue
        used = {m.group(1) or m.group(2) for w in words for m in SHELL_VARIABLE.finditer(w.text)}
        variants = [b for b in branches if used & set(b)] or [{}]
        for branch in variants:
            # a branch's value that adds on to the variable (ARGS="$ARGS --enable-lora") starts from its value before
            branch = {name: expand_shell_variables([Token(value, None)], known)[0].text for name, value in branch.items()}
            expanded = expand_words(words, known | branch)
            workload = docker_run(file, name, expanded) or cloud_run.workload(file, name, expanded) \
                or _direct(file, name, expanded) or _built(file, name, expanded, builds)
            if workload is None and look_unseen:
                notes += _unseen(file, expanded)
            if workload is None or any(_same(workload, w) for w in found):
                continue
            if installed and workload.image is None and workload.vllm_pin is None:
                workload = installed_before(workload, installed)
            if branch:
                workload = replace(workload, notes=workload.notes + (
                    "one workload per `if` branch, `case` arm or `for` item that sets its variables: this one with "
                    + ", ".join(f"{k}={v}" for k, v in sorted(branch.items())),))  # fmt: skip
            found.append(workload)
    for offset, body in shell_heredocs(script):  # `ssh host bash <<EOF` ... `EOF`: a script the shell runs
        inner, inner_notes = script_findings(body, first_line + offset, file, name, known)
        found += [w for w in inner if not any(_same(w, other) for other in found)]
        notes += inner_notes
    ray = RAY_START.search(script)
    if ray is not None:  # vLLM started beside a Ray node of its own: its workers may be placed on the other nodes
        found = [w if w.ray_cluster else replace(w, ray_cluster=" ".join(ray.group(0).split())) for w in found]
    return found, list(dict.fromkeys(notes))


PIP_INSTALLERS = {"pip", "pip3"}
"""`pip install`, `pip3 install`, `python -m pip install`, `uv pip install`: each names its packages as words."""
PIP_PIN = re.compile(r"^vllm(?:\[[\w,-]+\])?==v?(\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?)$")
"""A requirement that pins one release: vllm==0.9.2, vllm[audio]==0.10.1.1."""
ENVIRONMENT_RELEASE = "the Python environment that runs it (whichever vLLM is installed there)"
UNKNOWN_RELEASE_NOTE = "vLLM run directly by a shell script: the version is the environment's, unknown here"


def pip_installed_release(words: list[Token]) -> tuple[str, Token] | None:
    """The release a `pip install ... vllm==X` command installs, and its word (a range or a bare `vllm`: None)."""
    names = [PurePosixPath(w.text).name for w in words]
    at = next((i for i, name in enumerate(names) if name in PIP_INSTALLERS), None)
    if at is None or "install" not in names[at + 1:]:
        return None
    for word in words[at + 1:]:
        found = PIP_PIN.match(word.text.strip("'\""))
        if found:
            return found.group(1), word
    return None


def installed_in(script: str, first_line: int, known: dict[str, str] | None = None) -> tuple[str, Token] | None:
    """The release the script's last `pip install vllm==X` installs (a SkyPilot setup, a cloud-init command)."""
    if "vllm" not in script:
        return None
    installed = None
    for words in script_commands(script, first_line):
        installed = pip_installed_release(expand_words(words, known or {})) or installed
    return installed


def installed_before(workload: Workload, installed: tuple[str, Token]) -> Workload:
    """The workload read as the release the script (or a machine's boot commands) pip-installs before running it."""
    release, word = installed
    note = f"vLLM {release} installed by the script before it runs ({word.text}, line {word.line}): read as that release"
    return replace(workload, vllm_pin=release, vllm_pin_line=word.line,
                   notes=tuple(n for n in workload.notes if n != UNKNOWN_RELEASE_NOTE) + (note,))


MAX_CALL_DEPTH = 3
"""Functions calling functions: three levels are read, deeper calls are left as commands."""
SCRIPT_SHELLS = {"bash", "sh", "zsh", "dash"}
SHIFT = re.compile(r"^\s*shift(?:\s+(\d+))?\s*(?:#.*)?$", re.MULTILINE)
ALL_ARGUMENTS = re.compile(r'"\$@"|"\$\*"|\$@|\$\*')


def _tested(words: list[Token]) -> list[Token]:
    """The command after the keywords a shell tests or runs it under (`if main; then`, `while ...`, `!`)."""
    while words and words[0].text in CONDITION_KEYWORDS:
        words = words[1:]
    return words


# a script's own folder as its callers name it: "${SCRIPT_DIR}/", "$(dirname "$0")/", "$DIR/" (set from dirname), "./"
SCRIPT_DIR_PREFIX = re.compile(r"""^(?:\$\{?\w*DIR\w*\}?/|\$\(dirname\s+"?\$(?:0|\{?BASH_SOURCE(?:\[0\])?\}?)"?\)/|\./)""")


def _called_script_file(words: list[Token], file: str) -> tuple[Path, str, dict[str, str]] | None:
    """(path, text with the call's arguments in place, the variables the call sets in front of it) of a script file
    of the same repository that the command runs (`bash PATH ARGS`, `CUDA_VISIBLE_DEVICES=2,3 ./PATH ARGS`), found by
    its name beside the caller, with $1.. the arguments and "$@" those left after the script's `shift`s; None for
    any other command, or a file that names no vLLM."""
    env: dict[str, str] = {}
    while words and (words[0].text in PLAIN_PREFIXES or words[0].text in CONDITION_KEYWORDS
                     or ASSIGNMENT.match(words[0].text)):
        if ASSIGNMENT.match(words[0].text):
            name, _, value = words[0].text.partition("=")
            env[name] = value
        words = words[1:]  # `exec bash ...`, `if ./launch.sh ...; then`, `VAR=value ./launch.sh`
    if words and PurePosixPath(words[0].text).name in WRAPPERS:  # `srun -N1 apptainer exec IMG ./start_head.sh 4`
        words = _unwrapped(words)[0]
    if words and PurePosixPath(words[0].text).name in SCRIPT_SHELLS:
        words = words[1:]
    if not words or not words[0].text.endswith((".sh", ".bash")) or file in ("", "<stdin>") or file.endswith(".service"):
        return None  # a unit's ExecStart script is read by systemd_units, with the unit's Environment= values
    path = Path(file).parent / PurePosixPath(words[0].text).name
    relative = SCRIPT_DIR_PREFIX.sub("", words[0].text)  # "${SCRIPT_DIR}/../scripts/start.sh": from the caller's folder
    if not path.is_file() and "/" in relative and not relative.startswith("/"):
        path = Path(os.path.normpath(Path(file).parent / relative))
    try:
        if not path.is_file() or path.resolve() == Path(file).resolve():
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if "vllm" not in text.lower():
        return None
    arguments = [w.text for w in words[1:]]
    shifted = sum(int(m.group(1) or 1) for m in SHIFT.finditer(text))
    rest = " ".join(shlex.quote(a) for a in arguments[shifted:])
    return path, with_arguments(ALL_ARGUMENTS.sub(lambda _: rest, text), arguments), env


def _functions(script: str, file: str, depth: int) -> dict[str, ShellFunction]:
    """The functions the script can call: a sourced file's (read once, from the top script), then its own."""
    if depth >= MAX_CALL_DEPTH:
        return {}
    sourced = sourced_functions(script, file) if depth == 0 and ("source " in script or ". " in script) else {}
    return sourced | (functions_in(script) if "{" in script else {})


def _called_functions(script: str, first_line: int, functions: dict[str, ShellFunction]) -> set[str]:
    """The functions whose body names vLLM and that some command of the script calls."""
    if not functions:
        return set()
    with_vllm = {name for name, f in functions.items() if "vllm" in "\n".join(f.body).lower()}
    called = set()
    for words in map(_tested, script_commands(script, first_line)):
        if words and words[0].text in with_vllm:
            called.add(words[0].text)
    return called


def _function_call(function: ShellFunction, words: list[Token], first_line: int, file: str, name: str,
                   known: dict[str, str], depth: int, functions: dict[str, ShellFunction],
                   arrays: dict[str, list[Token]]) -> tuple[list[Workload], list[str]]:
    """The workloads of one call of a shell function: its body with the call's arguments as $1.., on the script's
    own lines (a sourced file's function: every word at the call's line, noted); the functions it calls are the
    script's (`main` calling `start_server`)."""
    body, local_values = called_body(function, [w.text for w in words[1:]])
    call_line = words[0].line or first_line
    if function.source is None:
        inner, notes = script_findings("\n" * function.first + body, first_line, file, name, known | local_values,
                                       depth=depth + 1, outer=functions, outer_arrays=arrays)  # fmt: skip
    else:
        inner, notes = script_findings(body, call_line, file, name, known | local_values, depth=depth + 1,
                                       outer=functions, outer_arrays=arrays)
        inner = [replace(w, line=call_line, command_line=call_line, image_line=call_line if w.image else None,
                         argv=tuple(replace(t, line=call_line) for t in w.argv)) for w in inner]  # fmt: skip
    where = f" of {function.source}" if function.source else ""
    note = f"run by the shell function {function.name}{where}, with this call's arguments as its $1.."
    return [replace(w, notes=w.notes + (note,)) for w in inner], notes


def _shell_string(words: list[Token]) -> Token | None:
    """The script of `bash -c 'SCRIPT'` / `nohup sh -lc "SCRIPT"` (a shell's -c among its short options), or None."""
    while words and words[0].text in PLAIN_PREFIXES:
        words = words[1:]
    if len(words) < 3 or PurePosixPath(words[0].text).name not in SHELLS:
        return None
    flag = next((i for i, w in enumerate(words[1:4], 1) if SHELL_COMMAND_OPTION.match(w.text)), None)
    if flag is None or flag + 1 >= len(words):
        return None
    script = words[flag + 2] if words[flag + 1].text == "--" and flag + 2 < len(words) else words[flag + 1]
    return script if "vllm" in script.text.lower() else None


# tmux's `send-keys` / screen's `-X stuff`: the string typed into a terminal's shell, which runs it; tmux's key names
# (C-m, Enter) press keys, its -t / -N options take a value (man tmux, "send-keys"; man screen, "stuff")
TMUX_KEY_NAMES = re.compile(r"^(?:C-[a-zA-Z]|M-[a-zA-Z]|Enter|KPEnter|Escape|Space|Tab|BSpace)$")
TMUX_VALUE_OPTIONS = {"-t", "-N", "-S", "-L", "-f"}


# pm2's `start` options that take a value (pm2 --help, "start"): the rest are switches
PM2_VALUE_OPTIONS = {"-n", "--name", "--interpreter", "--interpreter-args", "--node-args", "--cwd", "-i", "--instances",
                     "-l", "--log", "-o", "--output", "-e", "--error", "--namespace", "--max-memory-restart", "--cron",
                     "--cron-restart", "--env", "--log-date-format", "--restart-delay", "--max-restarts", "-x"}


def _pm2_started(words: list[Token]) -> Token | None:
    """The command line `pm2 start "vllm serve ..."` (a quoted command) or `pm2 start vllm -- serve ...` (a program
    and its arguments after --) runs, as one string, or None."""
    texts = [w.text for w in words]
    if not words or PurePosixPath(texts[0]).name != "pm2" or "start" not in texts[:3]:
        return None
    index = texts.index("start") + 1
    while index < len(words) and texts[index].startswith("-") and texts[index] != "--":
        index += 2 if texts[index] in PM2_VALUE_OPTIONS else 1
    if index >= len(words) or texts[index] == "--":
        return None
    program = words[index]
    rest = texts[texts.index("--", index) + 1:] if "--" in texts[index:] else []
    line = " ".join([program.text, *(shlex.quote(t) for t in rest)])
    return Token(line, program.line) if "vllm" in line.lower() else None


def _typed_keys(words: list[Token]) -> Token | None:
    """The command string a `tmux ... send-keys` or `screen ... -X stuff` types into a terminal's shell, or that
    `pm2 start` runs, or None."""
    program = PurePosixPath(words[0].text).name if words else ""
    texts = [w.text for w in words]
    if program == "pm2":
        return _pm2_started(words)
    if program == "tmux" and ("send-keys" in texts or "send" in texts):
        index = texts.index("send-keys" if "send-keys" in texts else "send") + 1
        while index < len(words) and words[index].text.startswith("-") and len(words[index].text) > 1:
            index += 2 if words[index].text in TMUX_VALUE_OPTIONS else 1
        typed = [w for w in words[index:] if not TMUX_KEY_NAMES.match(w.text)]
        return typed[0] if typed else None
    if program == "screen" and "stuff" in texts and texts.index("stuff") + 1 < len(words):
        typed = words[texts.index("stuff") + 1]
        return Token(typed.text.replace("\\n", "\n").replace("^M", "\n"), typed.line)
    return None


SHELL_HEREDOC = re.compile(r"\b(?:ba|z|k|da)?sh\b[^<\n]*<<")
"""A here-document fed to a shell (`bash <<EOF`, `ssh host bash <<'EOF'`, `ssh host <<EOF`: the remote login shell)."""


HEREDOC_INTO_VARIABLE = re.compile(r"\bread\b[^<\n]*?\b([A-Za-z_]\w*)\s*<<|\b([A-Za-z_]\w*)=\$\(\s*cat\s*<<")
"""A here-document kept in a variable (`read -r -d '' CMD <<EOF`, `CMD=$(cat <<EOF`) for a shell to run later."""


def shell_heredocs(script: str) -> list[tuple[int, str]]:
    """(offset of its first line in the script, body) of each here-document a shell runs, fed to it or kept in a
    variable the script runs (`screen -dm bash -c "${CMD}"`, `eval "$CMD"`, `ssh host "$CMD"`); an unquoted delimiter's
    body as the shell hands it on (`\\$` is `$`, `\\``` is a backquote, `\\\\` a backslash), a quoted one's as written."""
    return [(heredoc.first_line - 1, heredoc.body if heredoc.quoted
             else heredoc.body.replace("\\$", "$").replace("\\`", "`").replace("\\\\", "\\"))
            for heredoc in heredocs(script) if SHELL_HEREDOC.search(heredoc.opener) or _run_later(heredoc.opener, script)]


def _run_later(opener: str, script: str) -> bool:
    kept = HEREDOC_INTO_VARIABLE.search(opener)
    if kept is None:
        return False
    name = re.escape(kept.group(1) or kept.group(2))
    # a shell's -c, eval, or ssh's remote command (`ssh $OPTS root@"$HOST" "$REMOTE_CMD"`: the remote login shell)
    return re.search(r"(?:\b(?:ba|z|k|da)?sh\s+-c|\beval|\bssh\b[^\n]*?)\s+[\"']?\$\{?" + name + r"\}?(?!\w)",
                     script) is not None


def _unseen(file: str, words: list[Token]) -> list[str]:
    """The note for a command (not read as a workload) that deploys an image named for vLLM whose command is built
    where kvdoctor cannot see it: a gcloud run deploy of an image built elsewhere, a docker run with no command."""
    if (found := cloud_run.unseen(words)) is not None:
        service, image, first = found
        return [unseen_note(f"{file}:{first.line}", f"Cloud Run service {service}", image)]
    parts = _docker_parts(words)
    if parts is not None and not parts[0].get("--entrypoint") and not parts[2] \
            and (names_vllm(parts[1].text) or unread_release(parts[1].text)):
        return [unseen_note(f"{file}:{parts[1].line}", "docker run", parts[1].text)]
    return []


ALTERNATE_VALUE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?\+((?:[^{}\n]|\{[^{}\n]*\})*)\}")
"""`${VAR:+words}`: the words when VAR is set (and not empty), nothing otherwise (one level of ${...} inside)."""


def alternate_values(script: str, known: dict[str, str]) -> str:
    """The script with each `${VAR:+words}` replaced as the shell would: its words where VAR is set in the known
    environment (even to a value unknown here, like a workflow's ${{ inputs.x }}), else nothing; so an optional
    `--env ...` before a docker run's image no longer reads as the image."""
    return ALTERNATE_VALUE.sub(lambda m: m.group(2) if known.get(m.group(1)) else "", script)


def _built(file: str, name: str, words: list[Token], builds: list[Build]) -> Workload | None:
    """A docker run / gcloud run deploy of an image the script (or its workflow) builds from a Dockerfile here."""
    if not builds:
        return None
    deploy = _docker_deploy(words) or cloud_run.deploy_of(words)
    return built_workload(file, name, deploy, builds, roots_of(file)) if deploy else None


def _docker_deploy(words: list[Token]) -> Deploy | None:
    parts = _docker_parts(words)
    if parts is None or parts[0].get("--entrypoint"):
        return None
    options, image, rest = parts
    gpus, name = options.get("--gpus", []), options.get("--name", [None])[-1]
    return Deploy(
        kind="docker run", container=name.text if name is not None else "docker run", image=image,
        env=tuple(_env(t) for flag in ("-e", "--env") for t in options.get(flag, [])), args=tuple(rest),
        first=_unwrapped(words)[0][0], gpu_limit=_gpu_count(gpus[-1].text) if gpus else None,
        gpu_limit_line=gpus[-1].line if gpus else None,
        env_from=tuple(f"env file {t.text!r}" for t in options.get("--env-file", [])),
    )  # fmt: skip


def _same(one: Workload, other: Workload) -> bool:
    return (one.container, [t.text for t in one.argv]) == (other.container, [t.text for t in other.argv])


def _unwrapped(words: list[Token]) -> tuple[list[Token], str | None]:
    """The words after sudo / srun and their options, and the wrapper's name (None when there is none)."""
    words, wrapper, _ = _unwrap(words)
    return words, wrapper


def _runs_after_dashes(words: list[Token]) -> bool:
    """An ENV_RUNNERS command with a `--` after which its command's words come."""
    return PurePosixPath(words[0].text).name in ENV_RUNNERS and any(w.text == "--" for w in words[1:])


def _unwrap(words: list[Token]) -> tuple[list[Token], str | None, tuple[str, Token] | None]:
    """_unwrapped's words and wrapper, and ('run' or 'exec', the image) of `apptainer run|exec [options] IMAGE ...` /
    singularity's (None otherwise): `run` runs the image's runscript, which for vLLM's image is its server."""
    wrapper, container = None, None
    while words:
        if words[0].text in PLAIN_PREFIXES:  # `nohup singularity exec ...`, `exec docker run ...`
            words = words[1:]
        elif _runs_after_dashes(words):  # `dotenvx run -- apptainer run ...`
            words = words[[w.text for w in words].index("--") + 1:]
        else:
            break
    while words and PurePosixPath(words[0].text).name in WRAPPERS:
        wrapper = PurePosixPath(words[0].text).name
        index = 1
        subcommand = None
        instance = False
        if wrapper in CONTAINER_EXEC:  # apptainer exec|run [options] IMAGE COMMAND...
            if [w.text for w in words[index:index + 2]] == ["instance", "run"]:
                index += 1  # `apptainer instance run [options] IMAGE NAME ARGS`: the runscript, as a named instance
                instance = True
            if index < len(words) and words[index].text in ("exec", "run"):
                subcommand = words[index].text
                index += 1
            values = CONTAINER_EXEC_VALUE_OPTIONS
        else:
            values = {"srun": SRUN_VALUE_OPTIONS, "shifter": SHIFTER_VALUE_OPTIONS}.get(wrapper, set())
        while index < len(words) and words[index].text.startswith("-"):
            if wrapper == "shifter" and (image := _shifter_image(words, index)) is not None:
                container = ("exec", image)
            index += 2 if words[index].text in values else 1
        if wrapper in CONTAINER_EXEC:
            if subcommand is not None and index < len(words):
                container = (subcommand, words[index])
            index += 2 if instance else 1  # the image (a .sif file or docker://...), an instance's name
        words = words[index:]
    if len(words) > 3 and PurePosixPath(words[0].text).name in CONTAINER_RUNNERS and words[1].text == "exec":
        # `docker exec [options] CONTAINER COMMAND...`: the command runs in a container started elsewhere (by name)
        index = 2
        while index < len(words) and words[index].text.startswith("-"):
            index += 2 if words[index].text in EXEC_VALUE_OPTIONS else 1
        if index + 1 < len(words):
            wrapper, words = words[index].text, words[index + 1:]
    return words, wrapper, container


def _shifter_image(words: list[Token], index: int) -> Token | None:
    """The image of Shifter's `--image=docker:IMG` / `--image IMG` at ``index`` (its `docker:` prefix dropped)."""
    word = words[index]
    if word.text.startswith("--image="):
        text = word.text.split("=", 1)[1]
    elif word.text in ("--image", "-i") and index + 1 < len(words):
        word = words[index + 1]
        text = word.text
    else:
        return None
    return Token(text.removeprefix("docker:"), word.line)


def _srun_job_name(words: list[Token]) -> str | None:
    """The job name srun gives the run (`--job-name=X`, `--job-name X`, `-J X`): the workload's name in Slurm."""
    if not words or PurePosixPath(words[0].text).name != "srun":
        return None
    index = 1
    while index < len(words) and words[index].text.startswith("-"):
        word = words[index].text
        if word.startswith("--job-name="):
            return word.split("=", 1)[1] or None
        if word in ("--job-name", "-J") and index + 1 < len(words):
            return words[index + 1].text
        index += 2 if word in SRUN_VALUE_OPTIONS else 1
    return None


def docker_run(file: str, name: str, words: list[Token]) -> Workload | None:
    """The vLLM workload of one `docker run` / `podman run` command's words (after sudo and the like), else None."""
    parts = _docker_parts(words)
    if parts is None:
        return None
    options, image, rest = parts
    words, _ = _unwrapped(words)
    entrypoint = options.get("--entrypoint")
    # `--entrypoint ""` clears the image's entrypoint: the words after the image are the whole command
    command = ([Token(entrypoint[-1].text, entrypoint[-1].line)] + rest) if entrypoint and entrypoint[-1].text else rest
    argv = after_launcher(command)
    if argv is None:  # `IMAGE /bin/bash -c "cd / && python3 -m vllm.entrypoints.openai.api_server ..."`
        argv = serve_argv([(t, None) for t in command], [], False, "")
    notes = (f"{words[0].text} run in a shell script: the image's server with the words after the image",)
    if argv is None and not entrypoint and runs_vllm_entrypoint(image.text):
        argv = rest
    elif argv is None and not entrypoint and only_serve_flags([(t, None) for t in rest], is_vllm_build(image.text)):
        argv, notes = rest, notes + (FLAGS_ONLY_NOTE.format(image=image.text),)  # $VLLM_IMAGE, a local build
    env = [_env(t) for flag in ("-e", "--env") for t in options.get(flag, [])]
    gpus = options.get("--gpus", [])
    count = _gpu_count(gpus[-1].text) if gpus else None
    built = None if entrypoint else env_built(image.text, env, count, words[0].line, rest)
    if built is not None:  # an entrypoint that builds the command from env never reads the words after the image
        argv, notes = built[0], (notes[0],) + tuple(built[1])
    if argv is None:
        return None
    container = options.get("--name", [None])[-1]
    run = f"{PurePosixPath(words[0].text).name} run"  # docker run, podman run, nerdctl run
    return Workload(
        file=file, line=words[0].line, platform="script", kind=run, name=name,
        container=container.text if container is not None else run, image=image.text,
        image_line=image.line, argv=tuple(argv), command_line=words[0].line, env=tuple(env),
        env_from=tuple(f"env file {t.text!r}" for t in options.get("--env-file", [])),
        gpu_limit=count, gpu_limit_line=gpus[-1].line if gpus else None,
        notes=notes,
    )  # fmt: skip


def _docker_parts(words: list[Token]) -> tuple[dict[str, list[Token]], Token, list[Token]] | None:
    """(options, image, the words after it) of a `docker run` / `podman run` / `docker create` (after sudo and the
    like), else None."""
    words, _ = _unwrapped(words)
    if len(words) < 3 or PurePosixPath(words[0].text).name not in CONTAINER_RUNNERS:
        return None
    # `docker run`, `docker create` (the container `docker start` runs, with run's options) and their `docker
    # container run|create` spellings
    index = 3 if words[1].text == "container" else 2
    if words[index - 1].text not in ("run", "create"):
        return None
    options: dict[str, list[Token]] = {}
    while index < len(words) and (words[index].text.startswith("-") or _options_variable(words, index)):
        if _options_variable(words, index):  # `docker run -d $docker_args -e X=1 IMAGE`: options, not the image
            index += 1
            continue
        flag, eq, inline = words[index].text.partition("=")
        if not eq and flag in DOCKER_VALUE_OPTIONS and index + 1 < len(words):
            options.setdefault(flag, []).append(words[index + 1])
            index += 2
        else:
            options.setdefault(flag, []).append(Token(inline, words[index].line))
            index += 1
    if index >= len(words):
        return None
    return options, words[index], words[index + 1 :]


def _options_variable(words: list[Token], index: int) -> bool:
    """A lone unset variable among docker run's options, more of docker's options after it: options from the
    environment (a variable followed by vLLM's `--model` is the image, its serve options after it)."""
    return SHELL_VARIABLE.fullmatch(words[index].text) is not None and index + 1 < len(words) \
        and _docker_option(words[index + 1].text)  # fmt: skip


def _docker_option(word: str) -> bool:
    flag = word.partition("=")[0]
    return flag in DOCKER_VALUE_OPTIONS or flag in DOCKER_SWITCHES or bool(SHORT_SWITCHES.match(flag))


def _direct(file: str, name: str, words: list[Token]) -> Workload | None:
    name = _srun_job_name(words) or name
    words, wrapper, contained = _unwrap(words)
    image = contained[1] if contained else None
    argv = after_launcher(words)
    if argv is None and wrapper is not None:  # `apptainer exec IMG bash -lc "...; vllm serve ..."`: the shell's script
        argv = serve_argv([(t, None) for t in words], [], False, "")
    run_notes: tuple[str, ...] = ()
    if argv is None and contained and contained[0] == "run" and (runs_vllm_entrypoint(image.text) or only_serve_flags(
            [(t, None) for t in words], is_vllm_build(image.text))):
        # `apptainer run IMAGE --model ...`: the image's runscript (vLLM's entrypoint) with the words after the image
        argv, run_notes = words, (f"{wrapper} run: the image's runscript with the words after the image",
                                  FLAGS_ONLY_NOTE.format(image=image.text))
    if argv is None:
        return None
    launcher = engine_launcher(words)
    release = _environment_release(words)
    pinned = tool_pin(words) if release is None else None
    if release:
        notes = (f"vLLM run from an environment named for vLLM {release[0].group(1)} ({release[1].text}): read as "
                 "that release",)
    elif pinned:
        notes = (f"vLLM run by a tool runner that installs vLLM {pinned[0]} for it ({pinned[1].text}): read as that "
                 "release",)
    else:
        notes = (UNKNOWN_RELEASE_NOTE,)
    notes += run_notes
    own = sorted(launcher.switches | launcher.valued | launcher.many) if launcher is not None else []
    if launcher is not None:
        notes += (f"{launcher.name} (python -m {launcher.module}): vLLM's engine arguments"
                  + (f", its own options ({', '.join(own)}) left out" if own else ""),)
    return Workload(
        file=file, line=words[0].line, platform="script", kind="script", name=name,
        # a container runtime names the container; srun and sudo only run the command, which names it
        container=(wrapper if wrapper not in ("srun", "sudo") else None)
        or (_launcher_words(words, launcher) if launcher else None) or translating_launcher_words(words) or "vllm serve",
        argv=tuple(argv),
        image=image.text if image else None, image_line=image.line if image else None,
        command_line=words[0].line, notes=notes,
        vllm_pin=release[0].group(1) if release else pinned[0] if pinned else None,
        vllm_pin_line=release[1].line if release else pinned[1].line if pinned else None,
        release_by=None if release or pinned or image else ENVIRONMENT_RELEASE,
    )  # fmt: skip


def _environment_release(words: list[Token]) -> tuple[re.Match[str], Token] | None:
    """The release an environment's name gives the executable that launches vLLM (its path), and that word."""
    for word in words:
        name = PurePosixPath(word.text).name
        if name == "vllm" or name.startswith("python"):
            found = ENV_NAMED_RELEASE.search(word.text)
            return (found, word) if found else None
    return None


def _launcher_words(words: list[Token], launcher: EngineLauncher) -> str:
    """'python3 -m dynamo.vllm' as the script writes it."""
    at = next(i for i, w in enumerate(words) if w.text == launcher.module)
    # the interpreter may be a variable the script does not set (`"$PYTHON_BIN" -m MODULE`)
    python = next((w for w in reversed(words[:at]) if PurePosixPath(w.text).name.startswith("python")), None) or next(
        w for w in reversed(words[:at]) if not w.text.startswith("-"))
    return f"{PurePosixPath(python.text).name} -m {launcher.module}"


def _env(token: Token) -> EnvVar:
    key, eq, value = token.text.partition("=")
    return EnvVar(key, value if eq else None, token.line, None if eq else "the host (docker run -e NAME)")


def _gpu_count(value: str) -> int | None:
    """--gpus 2 -> 2; --gpus '"device=0,1"' -> 2; --gpus all -> None (the host's count)."""
    value = value.strip("'\"")
    if value.isdigit():
        return int(value)
    devices = re.search(r"device=([0-9,]+)", value)
    return len([d for d in devices.group(1).split(",") if d]) if devices else None
