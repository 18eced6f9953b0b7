"""The model dtype catalogue (kvdoctor/data/dtypes.yaml) against what vLLM itself accepts (the pack)."""

from kvdoctor.data.dtypes import CONFIG_DTYPE_NAMES, FLAG_DTYPES, MODEL_DTYPES
from kvdoctor.vllm_pack import load_release, pack_releases


def test_the_catalogue_names_exactly_the_dtype_values_every_release_accepts():
    for version in pack_releases():
        assert tuple(load_release(version).model_dtypes) == MODEL_DTYPES, version


def test_every_flag_and_config_spelling_means_a_torch_dtype():
    torch_dtypes = {"bfloat16", "float16", "float32"}
    assert set(FLAG_DTYPES) == set(MODEL_DTYPES) - {"auto"} and set(FLAG_DTYPES.values()) == torch_dtypes
    assert set(CONFIG_DTYPE_NAMES.values()) == torch_dtypes and torch_dtypes <= set(CONFIG_DTYPE_NAMES)
