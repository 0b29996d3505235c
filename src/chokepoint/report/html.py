"""Self-contained HTML reports for races and explanations.

One file that opens offline: inline CSS, plots as inline SVG, no script and no network. A
Content-Security-Policy forbids scripts and remote content outright, and every user-supplied
string (statements, setup, labels, errors, notes) is escaped, so a statement such as
``</script><img src=x onerror=alert(1)>`` shows as text and runs nothing.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from ..measure.timer import format_seconds
from .words import busy_machine, race_note, sweep_failures, visible

__all__ = ["explanation_html", "figure_html", "page", "race_html"]

_CSS = """
.chokepoint { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2430;
  max-width: 1100px; margin: 1.5em auto; padding: 0 1em; line-height: 1.45; }
.chokepoint h1 { font-size: 1.5em; margin-bottom: .2em; }
.chokepoint h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #d8dde6; }
.chokepoint code, .chokepoint pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace;
  background: #f3f5f8; border-radius: 4px; }
.chokepoint code { padding: 0 .25em; }
.chokepoint pre { padding: .6em .8em; white-space: pre-wrap; word-break: break-word; }
.chokepoint table { border-collapse: collapse; width: 100%; font-size: .92em; }
.chokepoint th, .chokepoint td { border-bottom: 1px solid #e3e7ee; padding: .35em .5em;
  text-align: right; vertical-align: top; }
.chokepoint th { background: #f3f5f8; }
.chokepoint td.text, .chokepoint th.text { text-align: left; }
.chokepoint td.text, .chokepoint code { overflow-wrap: anywhere; }
.chokepoint .yes { color: #137333; font-weight: 600; }
.chokepoint .no { color: #b3261e; font-weight: 700; }
.chokepoint .machine { color: #4a5568; }
.chokepoint .share { display: inline-block; height: .7em; background: #3b82f6;
  border-radius: 2px; vertical-align: middle; margin-right: .4em; }
.chokepoint .finding { margin: .6em 0; padding: .5em .8em; border-left: 4px solid #3b82f6;
  background: #f7f9fc; }
.chokepoint .ruled { color: #4a5568; }
.chokepoint figure { margin: 1em 0; }
.chokepoint svg { max-width: 100%; height: auto; }
"""

_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        "font-src data:; script-src 'none'")


def _e(value) -> str:
    """``value`` escaped for HTML, its control and bidi characters shown as escapes
    (:func:`~.words.visible`: U+202E would reverse the report's own text after it)."""
    return html.escape("" if value is None else visible(value), quote=True)


def page(title: str, body: str) -> str:
    """A complete, self-contained HTML document."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body>{body}</body></html>\n")


def fragment(body: str) -> str:
    """The report as a fragment for Jupyter (``_repr_html_``)."""
    return f"<style>{_CSS}</style>{body}"


def _machine(machine: dict) -> str:
    parts = [f"{_e(machine.get('cpu', '?'))}", f"{_e(machine.get('cores', '?'))} cores",
             f"{_e(machine.get('threads', '?'))} threads"]
    if "read_bw_1t" in machine:
        parts.append(
            f"read {machine['read_bw'] / 1e9:.1f} GB/s ({machine['read_bw_1t'] / 1e9:.1f} on one "
            f"thread), write {machine['write_bw'] / 1e9:.1f}, copy {machine['copy_bw'] / 1e9:.1f},"
            f" triad {machine['triad_bw'] / 1e9:.1f} GB/s; float64 {machine['flops'] / 1e9:.1f} "
            "GFLOP/s elementwise"
            + "".join(f", {_e(k)} matmul {v / 1e9:.1f} GFLOP/s"
                      for k, v in sorted((machine.get("gemm") or {}).items()))
            + " (measured)")
    elif "read_bw" in machine:
        parts.append(f"read {machine['read_bw'] / 1e9:.1f} GB/s")
    return f"<p class=\"machine\" id=\"machine\">{'; '.join(parts)}</p>"


def _table(headers: list[tuple[str, bool]], rows: Iterable[list[str]], table_id: str) -> str:
    head = "".join(f"<th class=\"{'text' if text else 'num'}\">{_e(h)}</th>"
                   for h, text in headers)
    body = "".join(
        "<tr>" + "".join(f"<td class=\"{'text' if text else 'num'}\">{cell}</td>"
                         for cell, (_, text) in zip(row, headers, strict=True)) + "</tr>"
        for row in rows)
    return f"<table id=\"{table_id}\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure_html(make, figure_id: str, caption: str) -> str:
    try:
        from .plots import figure_svg

        svg = figure_svg(make())
    except ImportError as exc:
        return f"<p id=\"{figure_id}\">(no plot: {_e(exc)})</p>"
    return (f"<figure id=\"{figure_id}\">{svg}<figcaption>{_e(caption)}</figcaption>"
            "</figure>")


def race_html(result, *, full: bool = True) -> str:
    """A race as HTML: the machine, the candidates, the sweep plot, the roofline, agreement."""
    from .plots import race_figure, roofline_figure
    from .text import ratio_text, ratio_words

    m = result.machine
    body = ["<div class=\"chokepoint\"><h1>chokepoint race</h1>", _machine(m)]
    if result.setup:
        body.append(f"<h2>Setup</h2><pre id=\"setup\">{_e(result.setup)}</pre>")
    rows = []
    for c in result.candidates:
        agrees = {True: "<span class=\"yes\">yes</span>", False: "<span class=\"no\">NO</span>",
                  None: "–"}[c.agrees]
        label = f"<code>{_e(c.statement)}</code>"
        if c.statement == result.reference:
            label += " (reference)"
        if c.error:
            rows.append([label, "failed", "", "", "", "", "", "", "", _e(c.error)])
            continue
        rows.append([label, _e(format_seconds(c.median_s)), _e(format_seconds(c.iqr_s)),
                     _e(format_seconds(c.min_s)),
                     f"{c.relative:.2f}×" if c.relative else "–",
                     _e(ratio_text(c)) if c.ratio is not None else "–",
                     f"{c.gbps:.1f}" if c.gbps is not None else "–",
                     f"{100 * c.roof_fraction:.0f}%" if c.roof_fraction is not None else "–",
                     agrees, _e(race_note(c))])
    body.append("<h2>Candidates</h2>")
    body.append(_table([("candidate", True), ("median", False), ("± IQR", False),
                        ("min", False), ("relative", False),
                        ("vs reference (95% CI)", False), ("GB/s", False),
                        ("% roof", False), ("agrees", True), ("note", True)], rows,
                       "candidates"))
    sentences = [w for w in (ratio_words(c, result.reference) for c in result.candidates) if w]
    if sentences:
        body.append("<ul id=\"ratios\">" + "".join(f"<li>{_e(w)}</li>" for w in sentences)
                    + "</ul>")
    if busy := busy_machine(getattr(result, "load", None)):
        body.append(f"<p class=\"no\" id=\"busy\">Busy machine: {_e(busy)}.</p>")
    if result.interrupted:
        body.append(f"<p class=\"no\">{_e(result.interrupted)}: results so far.</p>")
    if result.sizes:
        body.append("<h2>Time against size</h2>")
        body.append(figure_html(lambda: race_figure(result), "sweep-plot",
                            f"sizes {result.sizes}; the table shows n={result.sizes[-1]}"))
        failures = sweep_failures(result.sizes, result.sweep_errors)
        if failures:
            body.append("<ul id=\"sweep-errors\">"
                        + "".join(f"<li>{_e(f)}</li>" for f in failures) + "</ul>")
    elif any(c.median_s is not None for c in result.candidates):
        body.append("<h2>Time per call</h2>")
        body.append(figure_html(lambda: race_figure(result), "bar-plot",
                            "median time per call of each candidate, whiskers from the first "
                            "to the third quartile of its repeats; the reference hatched"))
    points = [(c.statement, c.elements / c.bytes, c.elements / c.median_s)
              for c in result.candidates
              if c.median_s and c.bytes and getattr(c, "elements", 0)]
    if points and "read_bw" in m:
        body.append("<h2>Roofline</h2>")
        body.append(figure_html(
            lambda: roofline_figure(points, m["read_bw"], m.get("flops", m["read_bw"])),
            "roofline-plot", "each candidate at one operation per result element, against "
            "this machine's measured read bandwidth and float64 rate"))
    body.append("<h2>Agreement</h2><ul id=\"agreement\">")
    for c in result.candidates:
        verdict = ("reference" if c.statement == result.reference else
                   {True: "agrees", False: "DISAGREES", None: "not compared"}[c.agrees])
        body.append(f"<li><code>{_e(c.statement)}</code>: {verdict}"
                    + (f" — {_e(note)}" if (note := race_note(c)) else "") + "</li>")
    body.append("</ul></div>")
    text = "".join(body)
    return page("chokepoint race", text) if full else fragment(text)


def explanation_html(e, *, full: bool = True) -> str:
    """An explanation as HTML: the machine, the operations, the roofline, the findings."""
    from .plots import roofline_figure

    m = e.machine
    body = ["<div class=\"chokepoint\"><h1>chokepoint explain</h1>", _machine(m),
            f"<pre id=\"statement\">{_e(e.statement)}</pre>"]
    if e.setup:
        body.append(f"<h2>Setup</h2><pre id=\"setup\">{_e(e.setup)}</pre>")
    from .text import floor_text

    body.append(
        f"<p id=\"summary\">{_e(format_seconds(e.median_s))} (± {_e(format_seconds(e.iqr_s))} "
        f"IQR). It {_e(floor_text(e).strip())}.</p>")
    if e.lines:
        from .text import line_cause, line_rate, short_source

        rows = [[_e(short_source(line["source"])), f"<code>{_e(line['code'])}</code>",
                 _e(format_seconds(line["time_s"])), f"{100 * line['share']:.1f}%",
                 f"{line['bytes'] / 1e6:.1f} MB", _e(line_rate(line)),
                 f"{100 * line.get('ceiling_fraction', 0):.0f}%", _e(line_cause(line))]
                for line in e.lines]
        body.append("<h2>Lines</h2>")
        body.append(_table([("line", True), ("code", True), ("time", False), ("share", False),
                            ("bytes", False), ("rate", False), ("% ceiling", False),
                            ("cause", True)], rows, "lines"))
    rows = [[f"<code>{_e(op['name'])}</code>", _e(op.get("source", "")),
             f"{op['in_bytes'] / 1e6:.1f} MB",
             f"{op['out_bytes'] / 1e6:.1f} MB", "yes" if op["allocates"] else "",
             _e(format_seconds(op["time_s"])) if op["time_s"] else "free",
             f"{op['gbps']:.1f}", f"{op.get('gflops', 0):.1f}" if op.get("flops") else "",
             _e(op.get("cause") or "")] for op in e.ops]
    body.append("<h2>Operations</h2>")
    body.append(_table([("operation", True), ("source", True), ("read", False),
                        ("written", False), ("new memory", True), ("time", False),
                        ("GB/s", False), ("GFLOP/s", False), ("cause", True)], rows,
                       "operations"))
    points = e.roofline_points()
    if points:
        body.append("<h2>Roofline</h2>")
        body.append(figure_html(
            lambda: roofline_figure(points, m["read_bw"], m.get("flops", m["read_bw"])),
            "roofline-plot", "each operation at one operation per result element, against "
            "this machine's measured read bandwidth and float64 rate"))
    body.append("<h2>Findings</h2><div id=\"findings\">")
    if not e.findings:
        body.append("<p>No probe measured an effect.</p>")
    for f in e.findings:
        body.append(
            f"<div class=\"finding\"><strong>{_e(f.kind)}</strong> "
            f"<span class=\"share\" style=\"width:{max(2, round(200 * f.share))}px\"></span>"
            f"{100 * f.share:.0f}% of the time<br>{_e(f.evidence)}<br>"
            f"→ {_e(f.suggestion)}</div>")
    body.append("</div>")
    from .text import rewrites_text

    rewrites = rewrites_text(e)
    if rewrites:
        body.append("<h2>Measured rewrites of your lines</h2><ul id=\"line-rewrites\">"
                    + "".join(f"<li>{_e(text.strip())}</li>" for text in rewrites) + "</ul>")
    if getattr(e, "minor", None):
        body.append("<h2>Minor</h2><ul id=\"minor\">" + "".join(
            f"<li><strong>{_e(f.kind)}</strong> ({100 * f.share:.2g}%): {_e(f.evidence)}</li>"
            for f in e.minor) + "</ul>")
    if e.ruled_out:
        body.append("<h2>Ruled out</h2><ul id=\"ruled-out\" class=\"ruled\">")
        body.extend(f"<li><strong>{_e(r.kind)}</strong>: {_e(r.evidence)}</li>"
                    for r in e.ruled_out)
        body.append("</ul>")
    if e.rewrite:
        r = e.rewrite
        body.append("<h2>Rewrite</h2><ul id=\"rewrite\">")
        for item in (r, r.get("narrow")):
            if item:
                body.append(
                    f"<li><code>{_e(item['statement'])}</code>: predicted "
                    f"{_e(format_seconds(item['predicted_s']))}, measured "
                    f"{_e(format_seconds(item['measured_s']))}, {item['speedup']:.1f}× faster"
                    + (f" — {_e(item['note'])}" if item.get("note") else "") + "</li>")
        body.append("</ul>")
    if e.warnings:
        body.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(w)}</li>" for w in e.warnings)
                    + "</ul>")
    body.append("</div>")
    text = "".join(body)
    return page("chokepoint explain", text) if full else fragment(text)
