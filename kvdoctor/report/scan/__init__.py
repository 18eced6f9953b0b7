"""scan's formats: one adapter module per format, each a function of the ScanReport (see report/registry.py)."""
