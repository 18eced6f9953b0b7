"""any_of: a trie of literal words finds what a flat alternation (longest first) finds, at the same place."""

import random
import re

import pytest

from kvdoctor.base.literals import any_of
from kvdoctor.explain import verdict


def _flat(words):
    return re.compile("|".join(map(re.escape, sorted(words, key=len, reverse=True))))


@pytest.mark.parametrize("words", [
    verdict._CRASH_WORDS, verdict._LATE_WORDS, verdict._FOREIGN_WORDS,
    ("a", "ab", "abc", "b."), ("ode ", "ode:", "x"), ("(", "(?", "*** Error", "\\d"),
])
def test_trie_finds_what_the_flat_alternation_finds(words):
    rng = random.Random(7)
    trie, flat = any_of(words), _flat(words)
    alphabet = "".join(sorted(set("".join(words)))) + " \n"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        if rng.random() < 0.3:
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(words) + text[at:]
        want, got = flat.search(text), trie.search(text)
        assert (want and want.span()) == (got and got.span()), text


def test_shared_prefixes_become_one_branch():
    assert any_of(["ode ", "ode:"]).pattern == r"ode(?:\ |:)"
    assert any_of(["Killed"]).search("OOMKilled").span() == (3, 9)
    assert any_of(["x"]).search("none") is None
