"""`kvdoctor check`: facts -> rules -> dry run -> reconcile -> fix verification -> `Report` (run.py orchestrates)."""
