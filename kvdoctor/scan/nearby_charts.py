"""A values file kept outside its chart (`helm-examples/qwen3.yaml` for `helm-charts/llm-k8s/`, a config folder's
values.yaml for `configs/chart/`): the chart of the same repository whose values.yaml declares most of the keys the
file sets is rendered with it, as `helm template CHART -f FILE` would be. Charts are looked for near the file: its
folder and its parents' (MAX_PARENTS), within the scanned paths or the file's git checkout, then under the top of
those (a GitOps tree's argocd/apps/ENV/values/ beside its helm-charts/)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

MAX_PARENTS = 2
MAX_DEPTH = 3
MAX_FOLDERS = 400
MIN_SHARED = 2
"""Keys the file and the chart's values.yaml must share at least."""
MIN_SHARE = 0.5
"""Share of the file's keys the chart's values.yaml must declare."""
MAX_KEY_DEPTH = 4
SKIPPED = {"node_modules", "vendor", "third_party", "templates", "__pycache__", "venv", ".venv"}


def searched_folders(here: Path, roots: tuple[Path, ...]) -> list[Path]:
    """A file's folder and those of its parents (MAX_PARENTS) inside a scanned path or the file's git checkout, then
    the top of those (the checkout's root however far above)."""
    above = list(here.parents)[:MAX_PARENTS]
    # the checkout is found as git finds it, however deep the file sits (a chart's templates/ four levels down)
    checkout = next((folder for folder in [here, *here.parents] if (folder / ".git").exists()), None)
    inside = [root if root.is_dir() else root.parent for root in roots]
    if checkout is not None:
        inside.append(checkout)
    near = [here] + [folder for folder in above if any(folder == top or top in folder.parents for top in inside)]
    # then the top of the scanned tree or the checkout: a GitOps tree keeps values in argocd/apps/ENV/values/ and
    # its charts in helm-charts/ (the closest folder still wins: the near ones are searched first)
    tops = [top for top in dict.fromkeys(inside) if top not in near and (top == here or top in here.parents)]
    return near + tops


def chart_for_values(path: Path, text: str, roots: tuple[Path, ...]) -> Path | None:
    """The nearby chart the values file is for, or None (no chart near it declares most of its keys, or two do)."""
    keys = _keys_of(text)
    if len(keys) < MIN_SHARED:
        return None
    for folder in searched_folders(path.resolve().parent, roots):
        scored = sorted(((len(keys & _chart_keys(chart)), chart) for chart in _charts_under(folder)), reverse=True)
        scored = [(shared, chart) for shared, chart in scored if shared >= MIN_SHARED and shared >= MIN_SHARE * len(keys)]
        if len(scored) == 1 or (len(scored) > 1 and scored[0][0] > scored[1][0]):
            return scored[0][1]
        if scored:
            return None  # two charts fit as well: which one it is for is not known
    return None


def _keys_of(text: str) -> frozenset[str]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return frozenset()
    return frozenset(_paths(data)) if isinstance(data, dict) else frozenset()


def _paths(data: dict, prefix: str = "", depth: int = 0):
    for key, value in data.items():
        path = f"{prefix}.{key}"
        yield path
        if isinstance(value, dict) and depth < MAX_KEY_DEPTH:
            yield from _paths(value, path, depth + 1)


@lru_cache(maxsize=64)
def _chart_keys(chart: Path) -> frozenset[str]:
    values = chart / "values.yaml"
    if not values.is_file():
        return frozenset()
    try:
        return _keys_of(values.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return frozenset()


@lru_cache(maxsize=64)
def _charts_under(folder: Path) -> tuple[Path, ...]:
    found: list[Path] = []
    queue, walked = [(folder, 0)], 0
    while queue and walked < MAX_FOLDERS:
        current, depth = queue.pop(0)
        walked += 1
        if (current / "Chart.yaml").is_file() and (current / "templates").is_dir():
            found.append(current)
            continue
        try:
            subfolders = sorted(p for p in current.iterdir() if p.is_dir())
        except OSError:
            continue
        queue += [(p, depth + 1) for p in subfolders
                  if depth < MAX_DEPTH and not p.name.startswith(".") and p.name not in SKIPPED]  # fmt: skip
    return tuple(found)
