"""`kvdoctor explain`: read a failed vLLM start-up log and name the real failure.

explain (the flow, `explain_log` / `explain_text`):
  log_lines (read, strip prefixes)
  -> tracebacks (exception chains) + log_facts (facts vLLM printed; backend names via data/backend_names.yaml)
     + selector (attention-selection errors and their reasons)
  -> signatures (match the check and explain rules' patterns; families: the explain rules and their families)
  -> diagnosis (one primary cause in four passes: by rank, a consequence's cause, where vLLM raised it in the
     message_index, an ERROR line; its failure family)
  -> findings (the Report: a finding per matched rule, the findings the facts imply, notes, the check command)
  -> annotate (family, where the message comes from, the selector's reasons with backend_advice from the pack,
     request-time failures, a healthy log's warnings).
"""
