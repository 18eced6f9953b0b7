"""Matrix as one self-contained HTML page: a verdict heatmap with capacity in each cell; no scripts, no fetches."""

from __future__ import annotations

from html import escape

from kvdoctor import __version__
from kvdoctor.report.matrix.cells import capacity_detail, capacity_text, compile_label, gpu_label, reasons, rule_ids, version_label
from kvdoctor.matrix.grid import Cell, Matrix

COLOURS = {"PASS": "#1a7f37", "WARN": "#d4a72c", "FAIL": "#cf222e", "ERROR": "#8250df"}
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:20px;margin:0 0 4px} .sub{color:#57606a;margin:0 0 16px}
table{border-collapse:collapse;font-size:12px} th,td{border:1px solid #d0d7de;padding:6px 8px;text-align:center}
th{background:#f6f8fa;position:sticky;top:0} th.gpu{text-align:left;white-space:nowrap}
td.cell{color:#fff;min-width:96px} td.cell .v{font-weight:700;font-size:13px}
td.cell .r{font-family:ui-monospace,monospace;font-size:11px} td.cell .c{font-size:11px;opacity:.92}
.legend span{display:inline-block;padding:2px 10px;margin-right:6px;color:#fff;border-radius:3px;font-weight:700}
.notes{color:#57606a;font-size:12px;max-width:1100px} .notes li{margin:2px 0}
"""


def _cell(cell: Cell) -> str:
    fired = " ".join(reasons(cell))
    undecided = " ".join(rule_ids(cell, ("undecided",)))
    title = [f"{cell.gpu} / {cell.kv_cache_dtype}: {cell.verdict}"]
    if cell.error:
        title.append(cell.error)
    if undecided:
        title.append(f"undecided: {undecided}")
    if cell.dry_run:
        title.append(f"dry run {cell.dry_run}{' (cached)' if cell.cached else ''}")
    title.append(capacity_detail(cell))
    return (
        f'<td class="cell verdict-{cell.verdict.lower()}" style="background:{COLOURS[cell.verdict]}" '
        f'data-gpu="{escape(cell.gpu)}" data-kv="{escape(cell.kv_cache_dtype)}" title="{escape(" | ".join(title))}">'
        f'<div class="v">{cell.verdict}</div><div class="r">{escape(fired)}</div>'
        f'<div class="c">{escape(capacity_text(cell))}</div></td>'
    )


def _utilization(matrix: Matrix) -> str:
    if matrix.gpu_memory_utilization is None:
        return "the release's default --gpu-memory-utilization"
    return f"--gpu-memory-utilization {matrix.gpu_memory_utilization:g}"


def render(matrix: Matrix, verbose: bool = False) -> str:
    counts = {v: sum(1 for c in matrix.cells if c.verdict == v) for v in COLOURS}
    head = "".join(f"<th>{escape(d)}</th>" for d in matrix.kv_cache_dtypes)
    rows = []
    for gpu in matrix.gpus:
        cells = [matrix.cell(gpu, d) for d in matrix.kv_cache_dtypes]
        rows.append(f'<tr><th class="gpu">{escape(gpu_label(cells[0]))}</th>{"".join(_cell(c) for c in cells)}</tr>')
    weights = f"{matrix.weights_bytes / 2**30:.2f} GiB, {matrix.weights_source}" if matrix.weights_bytes else "unknown"
    legend = "".join(f'<span style="background:{c}">{v} {counts[v]}</span>' for v, c in COLOURS.items() if counts[v] or v != "ERROR")
    notes = "".join(f"<li>{escape(a)}</li>" for a in matrix.assumptions)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kvdoctor matrix: {escape(matrix.model)} on {escape(version_label(matrix))}</title>
<style>{CSS}</style></head>
<body>
<h1>Which KV-cache dtype works on which GPU: {escape(matrix.model)}, {escape(version_label(matrix))}</h1>
<p class="sub">Verdicts from kvdoctor's rules and {escape(compile_label(matrix))}; rule ids in each cell, '?' marking
an undecided one (<code>kvdoctor rules</code> explains them). Capacity: check's fit facts, as vLLM will log them (GPU
KV cache size in tokens, maximum concurrency) at {escape(_utilization(matrix))} after {escape(weights)} of weights,
one request being --max-model-len {matrix.max_model_len or "as each cell derives it"}.</p>
<p class="legend">{legend}</p>
<table id="matrix"><thead><tr><th class="gpu">GPU</th>{head}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
<h2 style="font-size:14px">Assumptions</h2><ul class="notes">{notes}</ul>
<p class="notes">kvdoctor {__version__}; {len(matrix.cells)} cells in {matrix.seconds:.1f} s on {matrix.workers} processes.</p>
</body></html>
"""
