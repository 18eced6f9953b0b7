"""The HTML matrix as a person sees it: rendered by headless Chromium (apt-get install -y chromium)."""

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from kvdoctor.matrix.capacity import Capacity
from kvdoctor.report.matrix import html
from kvdoctor.matrix.grid import Cell, Matrix

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)")


def _matrix() -> Matrix:
    cap = Capacity("fits", None, 32768, 66.25, 1.86, 16640, 4275088, 130.5, None, 6171394048, True,
                   "GPU KV cache size: 4,275,088 tokens; Maximum concurrency for 32,768 tokens per request: 130.5x")
    auto = Capacity("fits", None, 32768, 66.25, 1.86, 36864, 1929728, 58.9, None, 6171394048, True, None)
    cells = (
        Cell("A100", "auto", "PASS", (), "A100 80GB", 8.0, 80.0, capacity=auto),
        Cell("A100", "turboquant_k8v4", "FAIL", (("KVD101", "error", "fired"), ("KVD102", "error", "fired")),
             "A100 80GB", 8.0, 80.0, dry_run="failed", capacity=cap),
        Cell("L4", "auto", "WARN", (("KVD122", "warning", "fired"),), "L4", 8.9, 22.0, capacity=None),
        Cell("L4", "turboquant_k8v4", "PASS", (), "L4", 8.9, 22.0, dry_run="passed", cached=True, capacity=cap),
    )
    return Matrix("Qwen2.5-3B-Instruct <b>", "0.25.1", ("A100", "L4"), ("auto", "turboquant_k8v4"), cells, 0.9, 32768,
                  6171693056, "estimated from config.json", 1.5, 2)  # fmt: skip


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-dev-shm-usage", *args], capture_output=True, text=True, timeout=60)  # fmt: skip


def _png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes) into rows of raw pixels."""
    data = path.read_bytes()
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            bpp = 4 if colour == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pred = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else (b if abs(p - b) <= abs(p - c) else c)
            line[i] = (line[i] + (0, a, b, (a + b) // 2, pred)[ftype]) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def test_page_shows_verdicts_rules_and_capacity(tmp_path):
    page = tmp_path / "matrix.html"
    page.write_text(html.render(_matrix()), encoding="utf-8")
    dom = _chromium("--dump-dom", page.as_uri()).stdout
    assert "<b>" not in dom.split("<body>")[1].split("</h1>")[0]  # the model name is escaped, not markup
    cells = re.findall(r'<td class="cell verdict-(\w+)"[^>]*data-gpu="([^"]+)" data-kv="([^"]+)"', dom)
    assert cells == [("pass", "A100", "auto"), ("fail", "A100", "turboquant_k8v4"), ("warn", "L4", "auto"),
                     ("pass", "L4", "turboquant_k8v4")]  # fmt: skip
    assert "KVD101 KVD102" in dom and "4.28M tok / 130.50 seq" in dom and "GPU KV cache size: 4,275,088 tokens" in dom and "capacity n/a" in dom
    assert "http://" not in dom.split("</head>")[0] and "<script" not in dom  # self-contained


def test_heatmap_colours_are_on_screen(tmp_path):
    page = tmp_path / "matrix.html"
    page.write_text(html.render(_matrix()), encoding="utf-8")
    shot = tmp_path / "shot.png"
    _chromium(f"--screenshot={shot}", "--window-size=1000,700", "--hide-scrollbars", page.as_uri())
    width, bpp, rows = _png_pixels(shot)
    seen = set()
    for row in rows:
        for x in range(0, width * bpp, bpp * 4):
            seen.add(bytes(row[x : x + 3]))
    for colour in ("#1a7f37", "#cf222e", "#d4a72c"):  # PASS green, FAIL red, WARN amber
        assert bytes.fromhex(colour[1:]) in seen, colour
