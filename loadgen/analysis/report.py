"""The report: one self-contained HTML file, `summary.json` and a CSV per table.

REPORT_DIR/report.html     headline numbers, scenario, event timeline, a section per
                           analysis (figures inline as PNG, tables); runs side by side
REPORT_DIR/summary.json    every headline number of every run, and where the tables are
REPORT_DIR/tables/*.csv    every output table, all runs (first column `run`)
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from loadgen.analysis.common import Table
from loadgen.analysis.headline import headline, headline_labels
from loadgen.analysis.job import JobResult
from loadgen.analysis.jobs import JOBS

__all__ = ["HTML_ROWS", "write_report"]

HTML_ROWS: Final = 40
"""Rows of a table shown in the HTML; the CSV has them all."""


_STYLE: Final = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; }
h1 { font-size: 1.6em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 12.5px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f4f6f8; } td.text, th.text { text-align: left; }
tr.bad td { background: #fdecea; }
img { max-width: 100%; border: 1px solid #eee; margin: .4em 0; }
.note { color: #666; font-size: 12.5px; } .key { color: #c0392b; font-weight: bold; }
.lb { color: #8e44ad; font-weight: bold; } .scroll { overflow-x: auto; }
"""


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞"
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _html_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], bad: str | None = None
) -> str:
    head = "".join(
        f'<th class="text">{html.escape(c)}</th>' if i == 0 else f"<th>{html.escape(c)}</th>"
        for i, c in enumerate(columns)
    )
    body = []
    bad_index = columns.index(bad) if bad in columns else None
    for row in rows:
        cells = "".join(
            f'<td class="text">{html.escape(_fmt(v))}</td>'
            if isinstance(v, str)
            else f"<td>{html.escape(_fmt(v))}</td>"
            for v in row
        )
        flagged = bad_index is not None and row[bad_index] not in (None, 0, False, "")
        body.append(f'<tr class="bad">{cells}</tr>' if flagged else f"<tr>{cells}</tr>")
    return f'<div class="scroll"><table><tr>{head}</tr>{"".join(body)}</table></div>'


def _merged(name: str, runs: Sequence[tuple[str, JobResult]]) -> Table | None:
    """The table `name` of every run, with a `run` column first when there are several."""
    present = [(label, r.tables[name]) for label, r in runs if name in r.tables]
    if not present:
        return None
    columns = present[0][1].columns
    if len(runs) == 1:
        return present[0][1]
    rows = [(label, *row) for label, table in present for row in table.rows]
    return Table(name, ("run", *columns), rows)


def _scenario_html(label: str, result: JobResult) -> str:
    run = result.context.run
    scenario, manifest = run.scenario, run.manifest
    cluster = manifest.get("cluster") or {}
    start = ((scenario.get("cluster") or {}).get("start") or {}) if scenario else {}
    lines = [
        f"<h3>{html.escape(label)}</h3>",
        "<p>",
        f"<b>{html.escape(str(scenario.get('name', '?')))}</b> — "
        f"{html.escape(str(scenario.get('description', '')))}<br>",
        f"run {html.escape(run.run_id)} in {html.escape(run.path)}; client "
        f"{html.escape(str(manifest.get('client')))}; trace sample {run.sample:g}; "
        f"brokers {len(cluster.get('brokers') or [])} "
        f"({'started by loadgen' if cluster.get('started_by_loadgen') else 'given'}, "
        f"storage {html.escape(str(cluster.get('storage')))})",
    ]
    if start.get("config"):
        config = ", ".join(f"{k} = {v}" for k, v in start["config"].items())
        lines.append(f"<br>broker config: {html.escape(config)}")
    lines.append("</p>")
    phases = [(p.name, p.start_s, p.end_s) for p in run.phases()]
    if phases:
        lines.append(_html_table(("phase", "from (s)", "to (s)"), phases))
    producers = [
        (g.get("name"), g.get("topic"), g.get("count"), g.get("rate"), g.get("size"))
        for g in scenario.get("producers") or []
    ]
    if producers:
        lines.append(
            _html_table(("producers", "topic", "count", "rate (msg/s)", "size (B)"), producers)
        )
    consumers = [
        (g.get("name"), g.get("topic"), g.get("subscription"), g.get("type"), g.get("count"))
        for g in scenario.get("consumers") or []
    ]
    if consumers:
        lines.append(
            _html_table(("consumers", "topic", "subscription", "type", "count"), consumers)
        )
    notes = run.notes + [f"{job}: {why}" for job, why in result.skipped.items()]
    if notes:
        lines.append(f'<p class="note">Not analysed: {html.escape("; ".join(notes))}.</p>')
    return "\n".join(lines)


def _timeline_html(label: str, result: JobResult) -> str:
    ctx = result.context
    rows = [
        (
            str(number),
            round((event.at_ns - ctx.start_ns) / 1e9, 3),
            event.source,
            event.action,
            event.target,
            event.detail,
        )
        for number, event in enumerate(ctx.events, start=1)
    ]
    if not rows:
        return f"<p>{html.escape(label)}: no events.</p>"
    return f"<h3>{html.escape(label)}</h3>" + _html_table(
        ("#", "t (s)", "source", "action", "target", "detail"), rows
    )


def write_report(report_dir: Path, runs: Sequence[tuple[str, JobResult]]) -> Path:
    """Write the HTML report, summary.json and the CSVs; returns the HTML file's path."""
    report_dir.mkdir(parents=True, exist_ok=True)
    tables_dir = report_dir / "tables"
    tables_dir.mkdir(exist_ok=True)
    names = sorted({name for _label, result in runs for name in result.tables})
    for name in names:
        with (tables_dir / f"{name}.csv").open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            columns: tuple[str, ...] | None = None
            for label, result in runs:
                table = result.tables.get(name)
                if table is None:
                    continue
                if columns is None:
                    columns = table.columns
                    writer.writerow(("run", *columns))
                writer.writerows((label, *row) for row in table.rows)
    headlines = {label: headline(result) for label, result in runs}
    summary = {
        "runs": [
            {
                "label": label,
                "run_id": result.context.run.run_id,
                "path": result.context.run.path,
                "scenario": result.context.run.scenario.get("name"),
                "headline": headlines[label],
                "not_analysed": result.context.run.notes
                + [f"{job}: {why}" for job, why in result.skipped.items()],
            }
            for label, result in runs
        ],
        "headline_meaning": headline_labels(JOBS),
        "tables": {name: f"tables/{name}.csv" for name in names},
    }
    (report_dir / "summary.json").write_text(
        json.dumps(summary, indent=2, allow_nan=False, default=str)
    )
    path = report_dir / "report.html"
    path.write_text(_html(runs, headlines), encoding="utf-8")
    return path


def _html(runs: Sequence[tuple[str, JobResult]], headlines: dict[str, dict[str, Any]]) -> str:
    scenarios = sorted({str(r.context.run.scenario.get("name", "?")) for _l, r in runs})
    title = f"loadgen analysis: {', '.join(scenarios)}"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='note'>{len(runs)} run(s): "
        f"{html.escape(', '.join(label for label, _r in runs))}. "
        "Times are seconds since the start of each run. On every time plot the shaded bands "
        "are the scenario's phases and the dashed lines its events "
        "(<span class='key'>red</span>: the scenario's, <span class='lb'>purple</span>: the "
        "load manager's unloads and splits, dotted: its placements), numbered as in the event "
        "timeline (events at one instant share a label, e.g. 3–8).</p>",
        "<h2>Headline numbers</h2>",
    ]
    rows = [
        (meaning, *(headlines[label][key] for label, _r in runs))
        for key, meaning in headline_labels(JOBS).items()
        if any(headlines[label][key] is not None for label, _r in runs)
    ]
    parts.append(_html_table(("", *(label for label, _r in runs)), rows))
    parts.append("<h2>Scenario</h2>")
    parts += [_scenario_html(label, result) for label, result in runs]
    parts.append("<h2>Event timeline</h2>")
    parts += [_timeline_html(label, result) for label, result in runs]
    for job in JOBS:
        if not any(job.name not in r.skipped for _l, r in runs):
            continue
        parts.append(f"<h2>{html.escape(job.title)}</h2><p>{html.escape(job.explain)}</p>")
        for figure in job.figures:
            png = figure.render(runs)
            if png is not None:
                data = base64.b64encode(png).decode()
                parts.append(
                    f'<img alt="{html.escape(figure.title)}" src="data:image/png;base64,{data}">'
                )
        for name in job.tables:
            table = _merged(name, runs)
            if table is None:
                continue
            shown = table.rows[:HTML_ROWS]
            more = (
                f" (first {HTML_ROWS} of {len(table.rows):,} rows)"
                if len(table.rows) > HTML_ROWS
                else ""
            )
            parts.append(f"<h3>{html.escape(name)}</h3><p class='note'>tables/{name}.csv{more}</p>")
            parts.append(
                _html_table(table.columns, shown, job.flags.get(name)) if shown else "<p>none</p>"
            )
    parts.append("</body></html>")
    return "\n".join(parts)
