"""The static HTML leaderboard: sortable tables, success-vs-k curves and PASS@(k,T) heatmaps.

Everything is inline (SVG drawn here, a short script for sorting), so the page opens from disk on a
machine with no network. ``#sort=TABLE_ID:COLUMN:asc|desc`` in the address sorts a table on load.
"""

from __future__ import annotations

import html
import json
from typing import Any

from agentenvs.evaluation.leaderboard import Entry, by_env, columns
from agentenvs.evaluation.results import utc_now

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:.5rem 0 1rem}
th,td{border:1px solid #ccc;padding:.3rem .6rem;font-size:.9rem;text-align:right;white-space:nowrap}
.scroll{overflow-x:auto}
td:first-child,th:first-child,td:nth-child(2){text-align:left}
th{background:#f3f3f3;cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
.plots{display:flex;flex-wrap:wrap;gap:1.5rem;align-items:flex-start}
figure{margin:0}figcaption{font-size:.85rem;color:#555}
.note{color:#555;font-size:.85rem}
"""

SCRIPT = """
(function(){
  function cellValue(row, index){
    var cell = row.cells[index], raw = cell.getAttribute('data-value');
    var num = parseFloat(raw);
    return isNaN(num) ? raw : num;
  }
  function sortTable(table, index, direction){
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function(a, b){
      var x = cellValue(a, index), y = cellValue(b, index);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return direction === 'ascending' ? order : -order;
    });
    rows.forEach(function(row){ body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, i){
      if (i === index) th.setAttribute('aria-sort', direction); else th.removeAttribute('aria-sort');
    });
  }
  var tables = document.querySelectorAll('table.sortable');
  Array.prototype.forEach.call(tables, function(table){
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, index){
      th.addEventListener('click', function(){
        var next = th.getAttribute('aria-sort') === 'descending' ? 'ascending' : 'descending';
        sortTable(table, index, next);
      });
    });
    table.setAttribute('data-sortable', 'ready');
  });
  var match = /#sort=([^:]+):([^:]+):(asc|desc)/.exec(window.location.hash);
  if (match) {
    var table = document.getElementById(match[1]);
    if (table) {
      var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
      var index = headers.findIndex(function(th){ return th.getAttribute('data-key') === match[2]; });
      if (index >= 0) sortTable(table, index, match[3] === 'asc' ? 'ascending' : 'descending');
    }
  }
  document.documentElement.setAttribute('data-leaderboard', 'ready');
})();
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


def render_table(env: str, rows: list[Entry]) -> str:
    cols = columns(rows)
    head = "".join(f'<th data-key="{_e(key)}" title="click to sort">{_e(header)}</th>' for key, header, _ in cols)
    body = []
    for row in rows:
        cells = []
        for _, _, cell in cols:
            text, value = cell(row)
            cells.append(f'<td data-value="{_e(value)}">{_e(text)}</td>')
        body.append(f'<tr data-row="{_e(row.row_id)}">{"".join(cells)}</tr>')
    return (
        f'<div class="scroll"><table class="sortable" id="table-{slug(env)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def render_curves(env: str, rows: list[Entry], width: int = 420, height: int = 260) -> str:
    """Success-vs-k: pass@k against k (log2 spacing), one line per leaderboard row, with CI whiskers."""
    ks = sorted({int(k) for row in rows for k in row.metrics["pass_at_k"]})
    left, right, top, bottom = 46, 150, 14, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    span = max(len(ks) - 1, 1)

    def x(k: int) -> float:
        return left + plot_w * (ks.index(k) / span if len(ks) > 1 else 0.5)

    def y(v: float) -> float:
        return top + plot_h * (1.0 - v)

    parts = [
        f'<svg class="curves" data-env="{_e(env)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#e5e5e5"/>')
        label = f"{tick * 100:.0f}%"
        parts.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" text-anchor="end">{label}</text>')
    for k in ks:
        parts.append(f'<text x="{x(k):.1f}" y="{top + plot_h + 16}" font-size="11" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">k</text>')
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>')
    for index, row in enumerate(rows):
        color = PALETTE[index % len(PALETTE)]
        curve = sorted((int(k), v) for k, v in row.metrics["pass_at_k"].items())
        points = " ".join(f"{x(k):.1f},{y(v['value']):.1f}" for k, v in curve)
        parts.append(
            f'<polyline class="curve" data-row="{_e(row.row_id)}" points="{points}" fill="none" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        for k, v in curve:
            low, high = v["ci95"]
            parts.append(
                f'<line x1="{x(k):.1f}" x2="{x(k):.1f}" y1="{y(low):.1f}" y2="{y(high):.1f}" '
                f'stroke="{color}" stroke-opacity=".4"/>'
            )
            parts.append(
                f'<circle cx="{x(k):.1f}" cy="{y(v["value"]):.1f}" r="3" fill="{color}">'
                f"<title>{_e(row.label)} pass@{k} = {v['value'] * 100:.1f}%</title></circle>"
            )
        legend_y = top + 14 * index + 8
        parts.append(
            f'<line x1="{left + plot_w + 10}" x2="{left + plot_w + 26}" y1="{legend_y}" y2="{legend_y}" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        parts.append(
            f'<text x="{left + plot_w + 30}" y="{legend_y + 4}" font-size="11">{_e(row.label)} ({_e(row.split)})</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def heat_color(value: float) -> str:
    """White (0) to dark blue (1)."""
    value = min(max(value, 0.0), 1.0)
    r, g, b = (int(255 + (end - 255) * value) for end in (8, 48, 107))
    return f"#{r:02x}{g:02x}{b:02x}"


def render_heatmap(row: Entry, cell: int = 14) -> str:
    """PASS@(k,T): rows are k, columns are the turn budget T, colour is the success probability."""
    grid = row.metrics["pass_at_k_t"]
    ks, turns, values = grid["k"], grid["T"], grid["values"]
    cell_w = max(4, min(cell, 560 // max(len(turns), 1)))
    left, top = 40, 8
    width, height = max(left + cell_w * len(turns) + 40, 200), top + cell * len(ks) + 30
    parts = [
        f'<svg class="heatmap" data-row="{_e(row.row_id)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    for i, k in enumerate(ks):
        y = top + i * cell
        parts.append(f'<text x="{left - 4}" y="{y + cell - 3}" font-size="10" text-anchor="end">k={k}</text>')
        for j, turn in enumerate(turns):
            value = values[i][j]
            parts.append(
                f'<rect class="cell" x="{left + j * cell_w}" y="{y}" width="{cell_w}" height="{cell}" '
                f'fill="{heat_color(value)}"><title>PASS@({k},{turn}) = {value * 100:.1f}%</title></rect>'
            )
    step = max(1, len(turns) // 10)
    for j, turn in enumerate(turns):
        if j % step == 0 or j == len(turns) - 1:
            parts.append(
                f'<text x="{left + j * cell_w + cell_w / 2:.1f}" y="{top + cell * len(ks) + 12}" '
                f'font-size="9" text-anchor="middle">{turn}</text>'
            )
    parts.append(f'<text x="{left}" y="{height - 3}" font-size="10">turn budget T</text>')
    scale_x = width - 95
    for step_index in range(11):
        parts.append(
            f'<rect x="{scale_x + step_index * 5}" y="{height - 11}" width="5" height="8" '
            f'fill="{heat_color(step_index / 10)}"/>'
        )
    parts.append(f'<text x="{scale_x - 3}" y="{height - 3}" font-size="9" text-anchor="end">0%</text>')
    parts.append(f'<text x="{scale_x + 58}" y="{height - 3}" font-size="9">100%</text></svg>')
    return "".join(parts)


def render_section(env: str, rows: list[Entry]) -> str:
    first = rows[0].result["env"]
    heatmaps = "".join(
        f"<figure>{render_heatmap(row)}<figcaption>PASS@(k,T) · {_e(row.label)} · {_e(row.split)}</figcaption></figure>"
        for row in rows
    )
    calibrated = [row for row in rows if row.metrics.get("calibration")]
    reliability = (
        f"<figure>{render_reliability(env, calibrated)}<figcaption>reliability (binary forecasts; ECE in the "
        "legend)</figcaption></figure>"
        if calibrated
        else ""
    )
    return (
        f'<section id="env-{slug(env)}"><h2>{_e(env)} <small>version {_e(first["version"])}</small></h2>'
        f"{render_table(env, rows)}"
        f'<div class="plots"><figure>{render_curves(env, rows)}<figcaption>success vs k (pass@k, 95% CI)'
        f"</figcaption></figure>{reliability}{heatmaps}</div></section>"
    )


def render_reliability(env: str, rows: list[Entry], size: int = 260, legend: int = 170) -> str:
    """Observed frequency against mean forecast per probability bin, one line per row; the diagonal is
    perfect calibration. Dot area grows with the bin's count."""
    pad, plot = 34, size - 48

    def px(v: float) -> float:
        return pad + plot * v

    def py(v: float) -> float:
        return 14 + plot * (1.0 - v)

    parts = [
        f'<svg class="reliability" data-env="{_e(env)}" xmlns="http://www.w3.org/2000/svg" width="{size + legend}" '
        f'height="{size}" viewBox="0 0 {size + legend} {size}" role="img">',
        f'<rect x="{pad}" y="14" width="{plot}" height="{plot}" fill="none" stroke="#999"/>',
        f'<line x1="{px(0)}" y1="{py(0)}" x2="{px(1)}" y2="{py(1)}" stroke="#bbb" stroke-dasharray="4 3"/>',
    ]
    for tick in (0.0, 0.5, 1.0):
        parts.append(f'<text x="{pad - 4}" y="{py(tick) + 4:.1f}" font-size="10" text-anchor="end">{tick:g}</text>')
        parts.append(f'<text x="{px(tick):.1f}" y="{size - 20}" font-size="10" text-anchor="middle">{tick:g}</text>')
    parts.append(f'<text x="{px(0.5):.1f}" y="{size - 6}" font-size="10" text-anchor="middle">forecast</text>')
    for index, row in enumerate(rows):
        color, calibration = PALETTE[index % len(PALETTE)], row.metrics["calibration"]
        bins = calibration["bins"]
        points = " ".join(f"{px(b['mean_forecast']):.1f},{py(b['frequency']):.1f}" for b in bins)
        parts.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        for b in bins:
            radius = 2 + 4 * (b["count"] / max(calibration["n"], 1)) ** 0.5
            parts.append(
                f'<circle cx="{px(b["mean_forecast"]):.1f}" cy="{py(b["frequency"]):.1f}" r="{radius:.1f}" '
                f'fill="{color}"><title>{_e(row.label)}: {b["count"]} forecasts, mean {b["mean_forecast"]:.2f}, '
                f"observed {b['frequency']:.2f}</title></circle>"
            )
        parts.append(
            f'<text x="{size + 4}" y="{20 + 14 * index}" font-size="11" fill="{color}">'
            f"{_e(row.label)} · ECE {calibration['ece']:.3f}</text>"
        )
    return "".join(parts) + "</svg>"


def render_html(entries: list[Entry]) -> str:
    """The whole page as one string: no external file, font, script or stylesheet."""
    sections = "".join(render_section(env, rows) for env, rows in by_env(entries).items())
    index = json.dumps(sorted({e.env for e in entries}))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>agentenvs leaderboard</title><style>{STYLE}</style></head><body>"
        "<h1>agentenvs leaderboard</h1>"
        f'<p class="note">Built {_e(utc_now())} from {len(entries)} results files. Success and score in percent '
        "with seeded bootstrap 95% intervals over tasks; pass@k is the unbiased estimator; PASS@(k,T) is the "
        "chance that one of k samples succeeds within T turns. Click a column to sort.</p>"
        f'<script type="application/json" id="envs">{_e(index)}</script>'
        f"{sections}<script>{SCRIPT}</script></body></html>"
    )
