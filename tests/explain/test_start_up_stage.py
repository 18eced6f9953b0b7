"""The start-up stage a failure was raised in, named in the cause (explain/start_up_stage.py)."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

OOM = """\
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", line 187, in determine_available_memory
    self.model_runner.profile_run()
  File "/venv/lib/python3.11/site-packages/vllm/v1/worker/gpu_model_runner.py", line 1483, in profile_run
    dummy_encoder_outputs = self.model.get_multimodal_embeddings(
  File "/venv/lib/python3.11/site-packages/vllm/jsontree.py", line 39, in json_map_leaves
    return func(value)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 294.00 MiB. GPU 0 has a total capacity of 7.65 GiB of which 165.12 MiB is free.
"""


def test_an_out_of_memory_names_the_stage_its_vllm_frames_tell():
    text = " ".join(explain_text(OOM).findings[0].cause.split())
    assert "during the profiling run that measures peak memory (profile_run)" in text
    loading = OOM.replace("determine_available_memory", "load_model").replace("profile_run", "load_weights")
    assert "during weight loading (load_weights)" in " ".join(explain_text(loading).findings[0].cause.split())
    bare = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 294.00 MiB.\n"  # no frames: no stage claimed
    assert " during " not in explain_text(bare).findings[0].cause


def test_a_v0_engines_zero_gpu_blocks_is_named_when_no_kv_cache_is_left():
    log = ("INFO 05-04 00:21:02 gpu_executor.py:119] # GPU blocks: 0, # CPU blocks: 512\n"
           "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
           "initializing the engine.\n")
    assert "# GPU blocks: 0" in explain_text(log).findings[0].cause
