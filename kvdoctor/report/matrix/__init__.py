"""matrix's formats: one adapter module per format, each a function of the Matrix (see report/registry.py)."""
