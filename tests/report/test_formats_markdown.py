from formats_support import IGNORE_REASON, failing_report, passing_report

from kvdoctor.report.check import markdown


def test_pr_comment_has_verdict_table_details_and_kernels(tmp_path):
    text = markdown.render(failing_report(tmp_path))
    assert text.startswith("### ❌ kvdoctor: **FAIL**")
    rows = [line for line in text.splitlines() if line.startswith("| 🔴") or line.startswith("| 🟡")]
    assert [r.split("|")[2].strip() for r in rows] == ["`KVD101`", "`KVD102`", "`KVD104`"]
    assert f"ignored: {IGNORE_REASON}" in rows[2]
    assert text.count("<details>") == 3 and text.count("</details>") == 3
    assert "| `_tq_fused_store_fp8` | store | failed (bf16_to_fp8e4b15_assert) |" in text
    # every table row has as many cells as its header
    for line in text.splitlines():
        if line.startswith("| severity"):
            width = line.count("|")
        elif line.startswith("| 🔴"):
            assert line.count("|") - line.count("\\|") == width


def test_pass_says_so(tmp_path):
    text = markdown.render(passing_report(tmp_path))
    assert text.startswith("### ✅ kvdoctor: **PASS**") and "No problems found" in text
