"""Servers that start vLLM's engine from options of their own, which RL launchers run beside the trainer (issue 27,
batches s102-s106): TRL's (`trl vllm-serve`, `python -m trl.scripts.vllm_serve`), whose options are read as the
engine arguments it passes and whose parser refuses any other (KVD215), and ms-swift's `swift rollout`, whose vllm_*
options are read the same way and whose many own options are left out, named, never judged."""

from __future__ import annotations

from kvdoctor.data.engine_launchers import TRANSLATING_LAUNCHERS
from kvdoctor.scan.command import after_launcher
from kvdoctor.scan.translated_options import translated, translation_note
from kvdoctor.scan.workload import Token

TRL = TRANSLATING_LAUNCHERS[0]


def _words(text: str) -> list[Token]:
    return [Token(word, 3) for word in text.split()]


def test_options_are_spelt_as_vllms_with_the_model_first_and_the_servers_own_left_out():
    argv = translated(_words("--tensor_parallel_size 2 --model Qwen/Qwen2.5-7B --data-parallel-size 2 --port 8000 "
                             "--max_model_len=4096 --log_level warning"), TRL)
    assert [t.text for t in argv] == ["Qwen/Qwen2.5-7B", "--tensor-parallel-size", "2", "--data-parallel-size", "2",
                                      "--max-model-len", "4096"]
    assert all(t.line == 3 for t in argv)
    assert argv[1].via.written == "--tensor_parallel_size 2"


def test_a_switch_takes_an_optional_boolean_and_a_false_one_is_left_out():
    argv = translated(_words("--model m --enable_prefix_caching true --enforce_eager false --trust_remote_code "
                             "--kv_cache_dtype fp8"), TRL)
    assert [t.text for t in argv] == ["m", "--enable-prefix-caching", "--trust-remote-code", "--kv-cache-dtype", "fp8"]


def test_an_option_trl_never_had_and_a_positional_are_marked_refused_with_their_values():
    argv = translated(_words("--model m --max_num_seqs 64 extra $EXTRA_ARGS"), TRL)
    refused = [t.text for t in argv if t.via is not None and t.via.refused]
    assert refused == ["--max_num_seqs", "64", "extra"]
    assert "$EXTRA_ARGS" in [t.text for t in argv if t.via is None]  # a variable unknown here is left to later passes


def test_the_note_names_what_was_read_as_what_and_the_release_that_added_an_option():
    note = translation_note(tuple(translated(_words("--model m --kv_cache_dtype fp8 --tensor_parallel_size 2"), TRL)))
    assert "--model m as the model" in note
    assert "--kv_cache_dtype fp8 as --kv-cache-dtype (TRL 0.18.0+)" in note
    assert "--tensor_parallel_size 2 as --tensor-parallel-size)" in note and note.count("(TRL") == 1


def test_both_ways_of_starting_the_server_are_found_after_env_and_a_runner():
    for command in ("CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model m --tensor_parallel_size 2",
                    "uv run python -m trl.scripts.vllm_serve --model m --tensor_parallel_size 2"):
        argv = after_launcher(_words(command))
        assert argv is not None and [t.text for t in argv][-3:] == ["m", "--tensor-parallel-size", "2"][-3:]


def test_trls_training_commands_are_not_its_server():
    assert after_launcher(_words("trl grpo --model m --use_vllm true")) is None


def _scanned(tmp_path, script: str):
    from scan_support import scan

    (tmp_path / "train.sh").write_text(script)
    (result,) = scan([str(tmp_path / "train.sh")], tmp_path).workloads
    return result


def test_a_refused_option_is_an_error_at_its_line_and_the_rest_is_judged_as_vllms(tmp_path):
    result = _scanned(tmp_path, "#!/bin/bash\nsrun --nodes=1 trl vllm-serve --model Qwen/Qwen2.5-7B \\\n"
                                "  --tensor_parallel_size 2 --max_num_seqs 64 &\naccelerate launch train.py\n")
    assert result.workload.container == "trl vllm-serve"  # srun runs the command; it names no container
    fired = {p.finding.rule_id: p for p in result.placed if p.finding.status == "fired"}
    assert "KVD215" in fired and fired["KVD215"].location.line == 3
    assert "--max_num_seqs 64" in fired["KVD215"].finding.cause and "--kv_cache_dtype" in fired["KVD215"].finding.cause
    assert "KVD004" not in fired  # TRL's own spelling is not judged as vLLM's parser would
    assert any("as --tensor-parallel-size" in note for note in result.workload.notes)


def test_trls_options_alone_raise_no_error(tmp_path):
    result = _scanned(tmp_path, "python -m trl.scripts.vllm_serve --model m --gpu_memory_utilization 0.85 "
                                "--enable_prefix_caching true --port 8000\n")
    assert result.workload.container == "python -m trl.scripts.vllm_serve"
    assert not [p for p in result.placed if p.finding.status == "fired" and p.finding.severity == "error"]


SWIFT = next(t for t in TRANSLATING_LAUNCHERS if t.program == ("swift", "rollout"))


def test_ms_swifts_rollout_passes_its_vllm_options_and_its_many_own_ones_are_left_out_not_refused():
    argv = translated(_words("--model Qwen/Qwen2.5-VL-7B --vllm_tensor_parallel_size 2 --vllm_data_parallel_size 2 "
                             "--template qwen2_5_vl --vllm_enforce_eager true --port 8000"), SWIFT)
    assert [t.text for t in argv if t.via is None or not t.via.left_out] == [
        "Qwen/Qwen2.5-VL-7B", "--tensor-parallel-size", "2", "--data-parallel-size", "2", "--enforce-eager"]
    assert not any(t.via is not None and t.via.refused for t in argv)
    note = translation_note(tuple(argv))
    assert "--template qwen2_5_vl" in note and "(ms-swift" not in note  # its releases were not read: no "X+" claims


def test_swift_rollouts_gpus_are_tensor_times_data_parallel(tmp_path):
    result = _scanned(tmp_path, "CUDA_VISIBLE_DEVICES=0,1 swift rollout --model m --vllm_tensor_parallel_size 2 "
                                "--vllm_data_parallel_size 2 --port 8000\n")
    assert result.workload.container == "swift rollout"
    fired = {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}
    assert "KVD201" in fired and "KVD215" not in fired


def test_a_server_in_a_script_an_image_runs_keeps_its_reading(tmp_path):
    from scan_support import scan

    (tmp_path / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.10.2\nCOPY serve.sh /serve.sh\n"
                                         "ENTRYPOINT [\"/serve.sh\"]\n")
    (tmp_path / "serve.sh").write_text("#!/bin/bash\ntrl vllm-serve --model m --tensor_parallel_size 2 --max_num_seqs 64\n")
    results = [r for r in scan([str(tmp_path / "Dockerfile")], tmp_path).workloads]
    assert [r.workload.platform for r in results] == ["dockerfile"]
    fired = {p.finding.rule_id for p in results[0].placed if p.finding.status == "fired"}
    assert "KVD215" in fired and "KVD004" not in fired  # the words keep their reading on the script's lines


def test_swift_deploy_is_a_vllm_server_only_with_infer_backend_vllm(tmp_path):
    result = _scanned(tmp_path, "CUDA_VISIBLE_DEVICES=0,1 swift deploy --model Qwen/Qwen2.5-7B-Instruct "
                                "--infer_backend vllm --vllm_tensor_parallel_size 4 --template qwen2_5 --port 8000\n")
    assert result.workload.container == "swift deploy"
    assert [t.text for t in result.workload.argv][1:4] == ["Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "4"]
    fired = {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}
    assert "KVD201" in fired and "KVD004" not in fired  # 4 GPUs asked of the 2 CUDA_VISIBLE_DEVICES shows


def test_swift_deploy_reads_the_unprefixed_spelling_of_ms_swift_3_6_and_earlier(tmp_path):
    result = _scanned(tmp_path, "swift deploy --model_id_or_path Qwen/Qwen2-7B-Instruct --model_type qwen2-7b-instruct "
                                "--infer_backend=vllm --tensor_parallel_size 2 --enforce_eager true\n")
    assert [t.text for t in result.workload.argv] == ["Qwen/Qwen2-7B-Instruct", "--tensor-parallel-size", "2",
                                                      "--enforce-eager"]
    assert any("--model_type qwen2-7b-instruct" in note for note in result.workload.notes)  # its own: named


def test_swift_deploy_on_another_backend_starts_no_vllm(tmp_path):
    from scan_support import scan

    for backend in ("--infer_backend pt", "--infer_backend sglang", ""):
        path = tmp_path / f"deploy{len(backend)}.sh"
        path.write_text(f"#!/bin/bash\nswift deploy --model Qwen/Qwen2.5-7B-Instruct {backend} --port 8000\n")
        assert not scan([str(path)], tmp_path).workloads
