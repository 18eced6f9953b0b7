"""A compiler child only ever compiles for one target (Triton 3.6.0 leaks one target's state into the next)."""

from __future__ import annotations

from pathlib import Path

from kvdoctor.dryrun import compiler_process


def test_jobs_for_different_targets_never_share_a_child(monkeypatch):
    seen: list[set[tuple[int, ...]]] = []

    def fake_serial(payload, timeout_s, triton_cache):
        seen.append({tuple(job["capability"]) for job in payload})
        return [{"status": "passed", "seconds": 0.0, "kernel": job["kernel"]} for job in payload]

    monkeypatch.setattr(compiler_process, "_run_serially", fake_serial)
    jobs = [{"kernel": f"k{i}", "capability": cap} for i, cap in enumerate([[9, 0], [8, 0], [9, 0], [8, 0], [7, 5]])]
    results = compiler_process.run_jobs(jobs, 10.0, Path("/tmp"))
    assert [r["kernel"] for r in results] == [j["kernel"] for j in jobs]  # results come back in job order
    assert seen and all(len(targets) == 1 for targets in seen)
    assert {t for targets in seen for t in targets} == {(9, 0), (8, 0), (7, 5)}


def test_child_replaces_tritons_source_hash_key_with_a_cheap_build_key():
    import subprocess
    import sys

    code = ("from kvdoctor.dryrun.child import _cheap_triton_key; _cheap_triton_key(); "
            "import triton, triton.runtime.cache as c; k = c.triton_key(); "
            "print(k.startswith(triton.__version__ + '-kvdoctor-'), len(k) < 100)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["True", "True"], out.stderr
