"""Secrets for verify: from a file or the environment, described by source only."""

from __future__ import annotations

import pytest

from kvdoctor.base.errors import UsageError
from kvdoctor.verify.credentials import read_credentials


def test_key_from_a_file_is_sent_as_bearer_and_described_without_its_value(tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    found = read_credentials(key, None, ["X-Team: $TEAM", "X-Plain: visible"], {"TEAM": "t0ken"})
    assert found.headers == (("Authorization", "Bearer s3cret"), ("X-Team", "t0ken"), ("X-Plain", "visible"))
    said = " ".join(found.described)
    assert "s3cret" not in said and "t0ken" not in said
    assert found.described[0] == f"Authorization: Bearer <from file {key}>"


def test_default_environment_variable_and_none():
    assert read_credentials(None, None, [], {"KVDOCTOR_API_KEY": "k"}).described == ("Authorization: Bearer <from $KVDOCTOR_API_KEY>",)
    assert read_credentials(None, None, [], {}).headers == ()


@pytest.mark.parametrize("file_text, env, headers, said", [
    (None, "NOPE", [], "--api-key-env NOPE: the variable is not set"),
    ("", None, [], "expected one line holding the key"),
    ("a\nb", None, [], "expected one line holding the key"),
    (None, None, ["no colon"], "expected 'Name: value'"),
    (None, None, ["X-A: $MISSING"], "$MISSING is not set"),
])  # fmt: skip
def test_bad_secrets_are_usage_errors(tmp_path, file_text, env, headers, said):
    key = None
    if file_text is not None:
        key = tmp_path / "key"
        key.write_text(file_text)
    with pytest.raises(UsageError, match=None) as raised:
        read_credentials(key, env, headers, {})
    assert said in raised.value.one_line()
