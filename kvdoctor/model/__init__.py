"""The records the stages hand on: `Facts` (facts.py), the dry run's requests and results (dry_run.py) and the
`Report` with its findings (report.py). Plain frozen data, no behaviour beyond flattening."""
