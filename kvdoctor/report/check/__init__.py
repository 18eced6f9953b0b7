"""check's formats: one adapter module per format, each a function of the check Report (see report/registry.py)."""
