"""Every output kvdoctor writes, in one format layer.

- `registry.py`: which formats each command offers (check, scan, matrix) and where each is rendered.
- Builders, pure functions of plain records, written once: `sarif.py`, `junit.py`, `github.py` (workflow
  annotations), `markdown.py` (tables and cells); `terminal.py` (colours, text capture); `wording.py` (how a
  finding and a deployment are said).
- Adapters, one module per format of a command: `check/` (the check Report), `scan/` (ScanReport), `matrix/`
  (the Matrix); each maps its record to a builder's input.
"""
