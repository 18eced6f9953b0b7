"""One version module: the pack's order, PEP 440's order, release numbers and runs of releases."""
from __future__ import annotations

import pytest

from kvdoctor.base.versions import (
    describe_runs,
    pack_order,
    parse_version,
    pep440_order,
    release_numbers,
    wheel_version,
)


def test_pack_order_sorts_pre_dev_and_post_releases_around_their_release():
    shuffled = ["0.10.0", "0.9.2", "0.9.2.post1", "0.9.2rc1", "0.10.0.dev3", "0.8.5", "0.10.1.1", "0.10.1"]
    assert sorted(shuffled, key=pack_order) == [
        "0.8.5", "0.9.2rc1", "0.9.2", "0.9.2.post1", "0.10.0.dev3", "0.10.0", "0.10.1", "0.10.1.1"]


def test_pack_order_puts_a_string_that_is_no_version_after_every_release():
    assert pack_order("not-a-version") > pack_order("99.0.0")
    assert pack_order("") == pack_order("garbage") == (1, (), 0)


def test_pack_order_ignores_a_local_part_and_keeps_the_parts_as_written():
    assert pack_order("0.34.0+cu126") == pack_order("0.34.0")  # not newer than the pack's 0.34.0
    assert pack_order("0.34.0.0") > pack_order("0.34.0")


def test_pep440_order_is_packagings_and_counts_a_string_that_is_no_version_as_0():
    assert pep440_order("0.34.0+cu126") > pep440_order("0.34.0")
    assert pep440_order("0.34.0.0") == pep440_order("0.34.0")
    assert pep440_order("0.20.0rc1") < pep440_order("0.20.0") < pep440_order("0.20.0.post1") < pep440_order("0.20.1")
    assert pep440_order("garbage") == pep440_order("0") < pep440_order("0.0.1")


@pytest.mark.parametrize("text, numbers", [
    ("0.26.0", (0, 26, 0)), ("0.26.0rc1", (0, 26, 0)), ("0.8.5.post1", (0, 8, 5)), ("0.33", (0, 33)),
    (None, ()), ("", ()), ("garbage", ()),
])
def test_release_numbers_as_written_and_empty_when_unknown(text, numbers):
    assert release_numbers(text) == numbers


def test_an_unknown_release_orders_before_every_release():
    assert release_numbers(None) < release_numbers("0.0.1") and release_numbers("garbage") < (0, 25, 0)


def test_parse_version_gives_none_for_no_version():
    assert parse_version(None) is None and parse_version("x.y") is None
    assert str(parse_version("0.25.1")) == "0.25.1"


def test_describe_runs_joins_neighbours_in_the_given_order():
    order = ["0.20.0", "0.20.1", "0.21.0", "0.22.0", "0.23.0"]
    assert describe_runs(["0.23.0", "0.20.0", "0.20.1", "0.21.0"], order) == "0.20.0-0.21.0, 0.23.0"
    assert describe_runs(["0.22.0"], order) == "0.22.0"
    assert describe_runs([], order) == ""
    assert describe_runs(["0.20.0", "0.20.1", "9.9"], order, ",") == "0.20.0-0.20.1,9.9"  # unknown: a run of its own


def test_wheel_version_reads_the_file_name_of_that_projects_wheel_only():
    assert wheel_version("/w/vllm-0.25.1-cp38-abi3-manylinux1_x86_64.whl") == "0.25.1"
    assert wheel_version("vllm-0.10.1.1+cu126-cp38-abi3-manylinux1_x86_64.whl") == "0.10.1.1+cu126"
    assert wheel_version("torch-2.11.0-cp311-cp311-linux_x86_64.whl") is None
    assert wheel_version("vllm.tar.gz") is None
