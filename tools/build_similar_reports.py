"""Build kvdoctor/data/similar_reports.json.gz: the words of each seen real log's failure (tests/fixtures/logs_real,
entries with heldout: false), with its thread, family, cause and fix, for explain's similar reports
(kvdoctor/explain/similar_reports.py). Held-out entries are never read.

    .venv/bin/python tools/build_similar_reports.py [--check]

--check leaves the data alone and measures it instead: each seen log of a named family, left out of the corpus in
turn, against the rest: how often the closest report's family is its own, at each similarity threshold.
Run it again after a batch of logs is cut (tools/cut_heldout_batch.py), never before: uncut logs are still seen.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvdoctor.explain import similar_reports as sr  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "logs_real"
OUT = ROOT / "kvdoctor" / "data" / sr.DATA


def failure_terms(text: str) -> Counter:
    """The terms explain_text gives with_similar_reports for this log (read by the same function)."""
    from kvdoctor.explain.explain import read_log_text
    from kvdoctor.explain.families import load_families
    from kvdoctor.rules import load_all_rules

    families = load_families()
    reading = read_log_text(text, load_all_rules([]) + list(families.rules), families)
    return sr.log_terms(reading.chains, reading.evidence)


def seen_entries() -> list[dict]:
    import yaml

    index = yaml.safe_load((LOGS / "index.yaml").read_text())
    entries = index["logs"] if isinstance(index, dict) else index
    return [e for e in entries if not e.get("heldout") and e.get("failure", True)]


def build(entries: list[dict]) -> dict:
    from kvdoctor.explain.log_lines import read_log

    terms = {e["file"]: failure_terms(read_log(str(LOGS / e["file"]))) for e in entries}
    frequency = Counter(word for counted in terms.values() for word in counted)
    logs = []
    for e in entries:
        vector = sr.weights(terms[e["file"]], frequency, len(entries))
        kept = dict(sorted(vector.items(), key=lambda item: -item[1])[: sr.TERMS_KEPT])
        logs.append({"file": e["file"], "family": e["family"], "source": e["source"],
                     "cause": " ".join(str(e.get("cause", "")).split()), "fix": " ".join(str(e.get("fix", "")).split()),
                     "terms": {word: round(x, 4) for word, x in kept.items()}})
    return {"format": sr.FORMAT, "built_from": "tests/fixtures/logs_real/index.yaml, heldout: false, failure: true",
            "documents": len(entries), "document_frequency": dict(sorted(frequency.items())), "logs": logs}


def check(entries: list[dict]) -> None:
    """Leave-one-out on the seen logs of a named family."""
    data = build(entries)
    thresholds = (0.2, 0.3, 0.35, 0.4, 0.5)
    right, given = Counter(), Counter()
    named = [log for log in data["logs"] if log["family"] != "other"]
    for log in named:
        best = max(((sum(x * other["terms"].get(w, 0.0) for w, x in log["terms"].items()), other["family"])
                    for other in data["logs"] if other is not log), default=(0.0, None))
        for threshold in thresholds:
            if best[0] >= threshold and best[1] != "other":
                given[threshold] += 1
                right[threshold] += best[1] == log["family"]
    for threshold in thresholds:
        print(f"similarity >= {threshold}: a family given to {given[threshold]}/{len(named)}, "
              f"its own {right[threshold]} ({100 * right[threshold] / max(given[threshold], 1):.0f} % of those given)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="measure leave-one-out instead of writing the data")
    args = parser.parse_args()
    entries = seen_entries()
    if args.check:
        check(entries)
        return
    data = build(entries)
    OUT.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), mtime=0))
    print(f"{OUT.relative_to(ROOT)}: {len(data['logs'])} seen logs, {len(data['document_frequency'])} terms, "
          f"{OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
