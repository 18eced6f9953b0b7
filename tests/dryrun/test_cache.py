"""Compile results are cached on disk: a warm run starts no compiler, a broken entry is recompiled."""

from __future__ import annotations

import threading
import zipfile

import pytest
from dryrun_support import founding_request, vllm_wheels  # noqa: F401  (fixtures)

import kvdoctor.dryrun.compiler_process as compiler_process
from kvdoctor.dryrun import cache, run_dry_run

pytestmark = pytest.mark.vllm_wheel


def _no_child(*args, **kwargs):
    raise AssertionError("a warm run must not start the compiler process")


def _recording(calls: list, real):
    """real, noting each call's first argument (a compile payload, a zip file) in calls."""

    def record(first, *args, **kwargs):
        calls.append(first)
        return real(first, *args, **kwargs)

    return record


def test_second_run_is_cached_and_starts_no_child(vllm_wheels, tmp_path, monkeypatch):
    request = founding_request(vllm_wheels["0.25.1"])
    cold = run_dry_run(request, cache_dir=tmp_path)
    monkeypatch.setattr(compiler_process, "start_child", _no_child)
    jobs_sent, wheels_opened = [], []
    monkeypatch.setattr(compiler_process, "run_jobs", _recording(jobs_sent, compiler_process.run_jobs))
    monkeypatch.setattr(zipfile, "ZipFile", _recording(wheels_opened, zipfile.ZipFile))
    warm = run_dry_run(request, cache_dir=tmp_path)

    assert jobs_sent == [] and wheels_opened == []  # nothing compiled, the wheel's kernels not extracted again
    assert all(k.cached for k in warm.kernels) and not any(k.cached for k in cold.kernels)
    assert warm.status == cold.status == "failed"
    assert warm.kernels[0].failure == cold.kernels[0].failure
    # a different target is a different key
    with pytest.raises(AssertionError, match="must not start"):
        run_dry_run(founding_request(vllm_wheels["0.25.1"], capability=(8, 6)), cache_dir=tmp_path)


def test_corrupt_entries_are_recompiled(vllm_wheels, tmp_path):
    request = founding_request(vllm_wheels["0.26.0"], model_dtype="float16")
    first = run_dry_run(request, cache_dir=tmp_path)
    entries = sorted((tmp_path / "results").rglob("*.json"))
    assert len(entries) == 3
    entries[0].write_text("{not json")
    entries[1].write_text('{"format": "kvdoctor-dryrun-1", "key": "someone else", "result": {}}')

    second = run_dry_run(request, cache_dir=tmp_path)
    assert second.status == first.status == "passed"
    assert sorted(k.cached for k in second.kernels) == [False, False, True]
    assert all(cache.load_result(tmp_path, e.stem) for e in entries)


def test_unwritable_cache_dir_runs_without_cache(vllm_wheels, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    report = run_dry_run(founding_request(vllm_wheels["0.25.1"], model_dtype="float16"), cache_dir=blocker / "sub")

    assert report.status == "passed"
    assert all("ran without cache" in k.note for k in report.kernels)


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KVDOCTOR_CACHE_DIR", str(tmp_path / "k"))
    assert cache.default_cache_dir() == tmp_path / "k"
    monkeypatch.delenv("KVDOCTOR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache.default_cache_dir() == tmp_path / "x" / "kvdoctor"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("HOME", raising=False)
    assert cache.default_cache_dir() is None
    assert cache.usable_cache_dir(None)[0] is None


def test_two_runs_at_once_share_the_cache(vllm_wheels, tmp_path):
    request = founding_request(vllm_wheels["0.26.0"], capability=(8, 6))
    reports = []
    threads = [threading.Thread(target=lambda: reports.append(run_dry_run(request, cache_dir=tmp_path)))
               for _ in range(2)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status for r in reports] == ["passed", "passed"]
    assert all(k.cached for k in run_dry_run(request, cache_dir=tmp_path).kernels)
    assert not list(tmp_path.rglob(".tmp-*")) and not list(tmp_path.rglob(".extract-*"))
