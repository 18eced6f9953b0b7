"""The terminal view: a coloured grid, GPUs down, KV-cache dtypes across, split to fit the width."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kvdoctor.matrix.grid import Matrix
from kvdoctor.report.matrix.cells import capacity_text, compile_label, gpu_label, reasons, version_label
from kvdoctor.report.terminal import VERDICT_STYLE
COLUMN_WIDTH = 18


def print_console(matrix: Matrix, console: Console, verbose: bool = False) -> None:
    """The grid as a person reads it in a terminal; verbose adds nothing (every cell is shown)."""
    console.print(f"[bold]kvdoctor matrix[/]: {escape(matrix.model)} | {escape(version_label(matrix))} | "
                  f"{len(matrix.gpus)} GPUs x {len(matrix.kv_cache_dtypes)} KV-cache dtypes")  # fmt: skip
    per_table = max(1, (console.width - 26) // COLUMN_WIDTH)
    dtypes = list(matrix.kv_cache_dtypes)
    for start in range(0, len(dtypes), per_table):
        chunk = dtypes[start : start + per_table]
        table = Table(show_lines=True, header_style="bold")
        table.add_column("GPU", no_wrap=True)
        for dtype in chunk:
            table.add_column(dtype, min_width=12, max_width=COLUMN_WIDTH)
        for gpu in matrix.gpus:
            row = [escape(gpu_label(matrix.cell(gpu, dtypes[0])))]
            for dtype in chunk:
                cell = matrix.cell(gpu, dtype)
                rules = " ".join(reasons(cell)) or ("" if cell.verdict != "ERROR" else escape(cell.error or ""))
                row.append(f"[{VERDICT_STYLE[cell.verdict]}]{cell.verdict}[/]\n{rules}\n[dim]{capacity_text(cell)}[/]".replace("\n\n", "\n"))
            table.add_row(*row)
        console.print(table)
    weights = f"{matrix.weights_bytes / 2**30:.2f} GiB ({matrix.weights_source})" if matrix.weights_bytes else "unknown"
    util = "release default" if matrix.gpu_memory_utilization is None else f"{matrix.gpu_memory_utilization:g}"
    length = matrix.max_model_len or "per cell"
    console.print(f"Weights: {escape(weights)}; --gpu-memory-utilization {util}; --max-model-len {length}; "
                  f"{matrix.seconds:.1f} s on {matrix.workers} processes")  # fmt: skip
    not_judged = sorted({c.capacity.why_not for c in matrix.cells if c.capacity and c.capacity.why_not})
    for why in not_judged:
        console.print(f"[dim]capacity n/a: {escape(why)}[/]")
    console.print(f"[dim]Verdicts: kvdoctor's rules and {escape(compile_label(matrix))}; a rule id ending in '?' is undecided.[/]")
    console.print("[dim]Capacity (tokens / concurrent requests):[/]")
    for line in matrix.assumptions:
        console.print(f"[dim]  - {escape(line)}[/]")


def render(matrix: Matrix, verbose: bool = False) -> str:
    buffer = io.StringIO()
    print_console(matrix, Console(file=buffer, width=160, highlight=False))
    return buffer.getvalue()
