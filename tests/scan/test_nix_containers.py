"""NixOS modules that run vLLM's container (scan/nix_containers.py, scan/nix_expr.py): the shapes of manifest batch
s62's homelab configurations (justinlime/dotfiles, rajeeshckr/nix-config, xav-ie/dots, alam0rt/nix-config)."""

from __future__ import annotations

from scan_support import scan, write_tree

from kvdoctor.scan.nix_expr import Evaluator, Located, parse
from kvdoctor.scan.run import read_manifests

PLAIN = """\
{ config, lib, pkgs, ... }:
let
  cfg = {
    model = "NousResearch/Hermes-3-Llama-3.2-3B";
    image = "vllm/vllm-openai:v0.25.1";
    port = 8000;
  };
in {
  virtualisation.oci-containers.containers = {
    vllm = {
      autoStart = false;
      extraOptions = [ "--ipc=host" "--device=nvidia.com/gpu=0,1" ];
      cmd = [
        "--model" cfg.model
        "--tensor-parallel-size" "4"
        "--swap-space" "4"
      ];
      image = cfg.image;
      ports = [ "${toString cfg.port}:8000" ];
    };
  };
}
"""

MODULE = """\
{ config, lib, ... }:
let
  cfg = config.services.vllm;
  toFlags = args: lib.flatten (lib.mapAttrsToList (name: value: [ "--${name}" (toString value) ]) args);
in {
  options.services.vllm = {
    enable = lib.mkEnableOption "vLLM";
    model = lib.mkOption { type = lib.types.str; default = "Qwen/Qwen3-8B"; };
    enforceEager = lib.mkOption { type = lib.types.bool; default = true; };
    maxModelLen = lib.mkOption { type = lib.types.nullOr lib.types.int; default = null; };
    serverArgs = lib.mkOption { default = { }; };
  };
  config = lib.mkIf cfg.enable {
    virtualisation.oci-containers.containers.vllm = {
      image = "vllm/vllm-openai:v0.25.1";
      cmd = [ "--model" cfg.model ]
        ++ lib.optionals cfg.enforceEager [ "--enforce-eager" ]
        ++ lib.optionals (cfg.maxModelLen != null) [ "--max-model-len" (toString cfg.maxModelLen) ]
        ++ toFlags cfg.serverArgs;
      extraOptions = [ "--gpus=2" ];
    };
  };
}
"""
HOST = """\
{ ... }: {
  services.vllm = {
    enable = true;
    model = "google/embeddinggemma-300m";
    maxModelLen = 2048;
    serverArgs = { "served-model-name" = "gemma"; };
  };
}
"""


def test_an_oci_container_with_let_bound_values_is_a_workload_on_its_lines(tmp_path):
    root = write_tree(tmp_path / "cfg", {"hosts/desktop/vllm.nix": PLAIN})
    (vllm,) = read_manifests([str(root)])[1]
    assert (vllm.kind, vllm.name, vllm.container, vllm.image) == ("NixOS oci-container", "vllm", "vllm",
                                                                  "vllm/vllm-openai:v0.25.1")  # fmt: skip
    assert [t.text for t in vllm.argv][:2] == ["--model", "NousResearch/Hermes-3-Llama-3.2-3B"]
    assert vllm.gpu_limit == 2  # --device=nvidia.com/gpu=0,1 (CDI)
    (result,) = scan([str(root)], tmp_path, gpu="A100").workloads
    placed = {p.finding.rule_id: p.location.line for p in result.placed if p.finding.status == "fired"}
    assert placed["KVD004"] == 16  # --swap-space: not an option of 0.25.1, at its own line
    assert "KVD201" in placed  # TP 4 on the two GPUs it is given


def test_a_module_reads_its_option_defaults_and_what_the_configuration_sets(tmp_path):
    alone = write_tree(tmp_path / "alone", {"modules/vllm.nix": MODULE})
    (vllm,) = read_manifests([str(alone)])[1]
    assert [t.text for t in vllm.argv] == ["--model", "Qwen/Qwen3-8B", "--enforce-eager"]
    assert vllm.gpu_limit == 2
    both = write_tree(tmp_path / "repo", {"flake.nix": "{ }\n", "modules/vllm.nix": MODULE,
                                          "hosts/sauron/default.nix": HOST})  # fmt: skip
    files, found, notes, unread = read_manifests([str(both)])
    (vllm,) = found
    assert [t.text for t in vllm.argv] == ["--model", "google/embeddinggemma-300m", "--enforce-eager",
                                           "--max-model-len", "2048", "--served-model-name", "gemma"]  # fmt: skip
    assert any("default.nix" in n and "nothing checked here" in n for n in notes)


def test_another_configurations_settings_never_leak_in(tmp_path):
    root = write_tree(tmp_path / "scan", {"a__repo/modules/vllm.nix": MODULE, "b__repo/host.nix": HOST})
    (vllm,) = read_manifests([str(root)])[1]
    assert [t.text for t in vllm.argv][:2] == ["--model", "Qwen/Qwen3-8B"]


def test_an_unparsable_nix_file_is_named_and_a_file_without_vllm_is_not_read(tmp_path):
    root = write_tree(tmp_path / "cfg", {"broken.nix": "{ vllm = [ \n", "other.nix": "{ x = 1; }\n"})
    files, found, notes, unread = read_manifests([str(root)])
    assert found == [] and any("broken.nix: a Nix file that mentions vLLM, not read" in n for n in notes)
    assert not any(f.endswith("other.nix") for f in files)


def test_the_nix_reader_evaluates_strings_sets_and_lists():
    text = '{ a = rec { x = "q"; y = "${x}-${toString 3}"; }; b = { c.d = 1; } // { e = 2; }; l = [ 1 ] ++ [ 2 ];\n' \
           '  s = \'\'\n    line one\n    ${"two"}\n  \'\'; }'
    evaluator = Evaluator(parse(text))
    value = evaluator.eval(parse(text), {})
    assert evaluator.value(evaluator.force(value["a"])["y"]) == "q-3"
    assert set(evaluator.force(value["b"])) == {"c", "e"}
    assert [evaluator.value(i) for i in evaluator.force(value["l"])] == [1, 2]
    assert evaluator.value(value["s"]) == "line one\ntwo\n"
    assert isinstance(evaluator.force(value["a"])["x"].force(evaluator), Located)


SERVICE = """\
{ pkgs, ... }:
let
  model = "/var/lib/vllm/models/Qwen3.6-27B-AWQ";
in {
  systemd.services.vllm = {
    description = "vLLM inference server";
    environment = { HF_HOME = "/var/lib/vllm/huggingface"; };
    serviceConfig = {
      ExecStart = builtins.concatStringsSep " " [
        "${pkgs.vllm}/bin/vllm serve ${model}"
        # a comment between the pieces
        "--tensor-parallel-size 2"
        "--swap-space 4"
      ];
    };
  };
}
"""


def test_a_nixos_systemd_service_running_vllm_is_read_with_each_piece_on_its_line(tmp_path):
    # batch s68 (costi/nixos-config vllm.nix)
    (service,) = read_manifests([str(write_tree(tmp_path / "cfg", {"vllm.nix": SERVICE}))])[1]
    assert (service.kind, service.name) == ("NixOS systemd service", "vllm")
    assert [(t.text, t.line) for t in service.argv] == [("/var/lib/vllm/models/Qwen3.6-27B-AWQ", 10),
                                                         ("--tensor-parallel-size", 12), ("2", 12),
                                                         ("--swap-space", 13), ("4", 13)]  # fmt: skip
