"""`kvdoctor explain`: read a failed vLLM start-up log and name the real failure.

log_lines (normalise prefixes) -> tracebacks (exception chains) + log_facts (facts vLLM printed)
-> signatures (rules.yaml patterns) -> explain (one primary cause, a Report).
"""
