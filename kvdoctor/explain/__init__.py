"""`kvdoctor explain`: read a failed vLLM start-up log and name the real failure.

explain (the flow, `explain_log` / `explain_text`):
  log_lines (read, .gz included; strip prefixes; a long log's INFO chatter set aside)
  -> tracebacks (exception chains) + log_facts (facts vLLM printed; backend names via data/backend_names.yaml)
     + selector (attention-selection errors and their reasons) + native_crash (a native crash's innermost frame)
  -> signatures (match the check and explain rules' patterns; families: the explain rules and their families)
  -> verdict (failure_evidence: every line that shows a failure; the exit contract)
  -> diagnosis (one primary cause in four passes: by rank, a consequence's cause, where vLLM raised it in the
     message_index, a failure line of the verdict's evidence; its failure family)
  -> findings (the Report: a finding per matched rule, the findings the facts imply, notes, the check command;
     texts filled with only the values the log gave)
  -> annotate (family, where the message comes from, the selector's reasons with backend_advice from the pack,
     request-time failures, a healthy log's warnings)
  -> verdict.uphold (a log with failure evidence always exits 1)
  -> verdict.cite_failure_lines + similar_reports (a failure no rule knows: its other failure lines quoted, and the
     seen real logs that read like it cited with their threads; the closest one's family as the likely one)
  -> start_up_shown (no failure: a PASS only on a line that shows vLLM up, else the undecided start_up_not_shown).
Before the diagnosis, verdict.survived and verdict.requested_shutdown set aside failure lines the server came up
after, or that a shutdown it was asked for printed.
"""
