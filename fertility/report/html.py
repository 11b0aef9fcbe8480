"""One self-contained HTML report, in the order a reader wants: the verdict of each tokenizer,
the charts, the side-by-side table, the findings grouped (collapsed), sample documents with
their tokens.

Opens offline: plotly.js is embedded once, each chart's data sits in a
`<script type="application/json">` block that a single inline script reads with JSON.parse.
Everything that comes from the corpus or the user (document text, language and file names,
tokenizer labels) is escaped: as HTML text with html.escape, and inside JSON with `<`, `>`,
`&` and the line separators written as \\u escapes, so no document can open a tag or a script.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

import plotly.graph_objects as go
import plotly.offline
from plotly.utils import PlotlyJSONEncoder

from fertility import unicode as U
from fertility.gate import evaluate
from fertility.measure.metrics import METRIC, shown
from fertility.numbers import fmt
from fertility.policy import default_policy
from fertility.report import summary as S
from fertility.tokenizers.pretokenizer import PRETOKENIZER

_SEV_COLOR = {"error": "#b91c1c", "warning": "#b45309", "info": "#1d4ed8"}
_PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d"]
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans","Noto Sans Bengali",
"Noto Sans Devanagari","Noto Sans Tamil","Noto Sans Telugu","Noto Sans Thai","Noto Sans Arabic",
"Noto Sans Hebrew","Noto Sans CJK SC","Noto Sans CJK JP","Noto Sans CJK KR",sans-serif;
margin:2rem auto;max-width:1200px;padding:0 1rem;color:#111;line-height:1.45}
h1{font-size:1.6rem}h2{margin-top:2.2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;vertical-align:top;text-align:left}
th{background:#f5f5f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
.sev{font-weight:600;text-transform:uppercase;font-size:.8rem}
.verdict{display:inline-block;padding:.2rem .7rem;border-radius:4px;color:#fff;font-weight:700}
.pass{background:#15803d}.fail{background:#b91c1c}.uncertain,.lossy{background:#b45309}
details{margin:.3rem 0}summary{cursor:pointer}
.cmp{display:grid;gap:.8rem;margin:.8rem 0}
.cmp>div{border:1px solid #ddd;border-radius:4px;padding:.5rem;min-width:0}
.cmp h4{margin:0 0 .3rem;font-size:.85rem;color:#444}
.toks{font-size:1.15rem;line-height:2.1;word-wrap:break-word;white-space:pre-wrap}
.t0{background:#dbeafe}.t1{background:#fef3c7}
.mi{text-decoration:underline 2px #dc2626;text-underline-offset:4px}.bp{background:#fecaca}
.legend span{margin-right:.8rem}
.muted{color:#666;font-size:.85rem}
"""
_INIT = """
document.querySelectorAll('script[type="application/json"][data-plot]').forEach(function(s){
  var fig = JSON.parse(s.textContent);
  Plotly.newPlot(s.getAttribute('data-plot'), fig.data, fig.layout,
                 {displaylogo: false, responsive: true});
});
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _json(obj: Any) -> str:
    text = json.dumps(obj, cls=PlotlyJSONEncoder, ensure_ascii=False)
    for a, b in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(a, b)
    return text


def _fmt(x: Any, digits: int = 2) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "" if x is None else str(x)
    return "" if math.isnan(v) else f"{v:.{digits}f}"


def render_html(report: Any, findings: list, gate_result: Any = None, *, policy: Any = None) -> str:
    """The whole report as one HTML string. gate_result: the gate's own verdict (`fertility
    gate --html`, `fertility fix`); else the verdicts come from evaluating `policy` (default:
    the built-in one) on the report, as `fertility report` prints them."""
    frame = report.frame
    tokd = {d.label: d for d in getattr(report, "tokenizers", [])}
    labels, families, shown = _kinds(report)
    scripts = _order_keys(frame, "script")
    result = gate_result
    if result is None and labels:
        result = evaluate(report, policy or default_policy(), findings=findings)
    parts = [
        "<h1>Tokenizer fertility report</h1>",
        _verdict_section(report, result, gated=gate_result is not None),
        _overview(report, tokd),
    ]
    for name, title, fig in charts(report):
        parts.append(
            f'<h2>{esc(title)}</h2><div id="plot-{name}" class="plot"></div>'
            f'<script type="application/json" data-plot="plot-{name}">'
            f"{_json(fig.to_plotly_json())}</script>"
        )
    parts.append(_table_section(frame, shown, scripts))
    if gate_result is not None:
        parts.append(_gate_section(gate_result))
    parts.append(_findings_section(findings, shown, report.table))
    parts.append(_samples_section(report, findings, labels + families))
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>fertility report</title><style>{_CSS}</style>"
        f"<script>{plotly.offline.get_plotlyjs()}</script></head>\n<body>\n{body}\n"
        f"<script>{_INIT}</script>\n</body></html>\n"
    )


def _kinds(report: Any) -> tuple[list[str], list[str], list[str]]:
    """The tokenizers' labels, the pre-tokenizer families', and those the table and the
    charts show (with no tokenizer, the corpus profile shows the families)."""
    tokd = {d.label: d for d in getattr(report, "tokenizers", [])}
    labels = [d.label for d in tokd.values() if d.kind != PRETOKENIZER]
    families = [d.label for d in tokd.values() if d.kind == PRETOKENIZER]
    return labels, families, labels or families


def charts(report: Any) -> list[tuple[str, str, go.Figure]]:
    """The report's charts in page order, as (name, title, figure): the HTML draws them,
    fertility.report.images writes them as image files. `name` is the plot's id and file
    name (no label in it: labels are user text)."""
    frame = report.frame
    labels, families, shown = _kinds(report)
    scripts = _order_keys(frame, "script")
    figs = [
        ("cpt", "Characters per token, by script (95% interval)", _fig_cpt(frame, shown, scripts)),
        (
            "share",
            "Tokens per character against the rest of the corpus, by language (1 = even)",
            _fig_share(frame, shown),
        ),
        (
            "ceiling",
            "Pre-tokenizer ceiling against what the tokenizer reaches (log scale)",
            _fig_ceiling(frame, labels, families, scripts),
        ),
    ]
    overlap = getattr(report, "overlap", None) or {}
    for i, lab in enumerate(labels):
        figs.append(
            (
                f"overlap-{i + 1}",
                f"Token overlap between languages, {lab}: 1 − Jensen-Shannon divergence "
                "of their token distributions (1 = the same tokens as often, 0 = none shared)",
                _fig_overlap(overlap.get(lab)),
            )
        )
    return [(name, title, fig) for name, title, fig in figs if fig is not None]


_BADGE = {"PASS": "pass", "PASS, LOSSY": "lossy", "FAIL": "fail", "UNCERTAIN": "uncertain"}


def _badge(word: str) -> str:
    return f'<span class="verdict {_BADGE.get(word, "uncertain")}">{esc(word)}</span>'


def _verdict_section(report: Any, result: Any, *, gated: bool) -> str:
    """The answer first: one row per tokenizer with the figures that decide it. A tokenizer
    whose text does not round-trip is never shown as a plain PASS."""
    if result is None:
        return (
            "<p>Corpus profile: no tokenizer named, so no verdict; the charts show the "
            "ceilings of the standard pre-tokenizers.</p>"
        )
    vs = S.verdicts(report, result)
    head = (
        "PASS, LOSSY"
        if result.passed and any(v.verdict == "PASS, LOSSY" for v in vs)
        else "PASS"
        if result.passed
        else "FAIL"
    )
    title = f"<h2>Gate {_badge(head)}</h2>" if gated else "<h2>Verdict</h2>"
    rows = []
    for v in vs:
        cells = S.verdict_cells(v)
        rows.append(
            f"<tr><td>{_badge(cells[0])}</td>"
            + "".join(f"<td>{esc(c)}</td>" for c in cells[1:])
            + "</tr>"
        )
    pref = S.preference(vs)
    return (
        title
        + "<table class=summary><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in S.SUMMARY_HEADERS)
        + "</tr>"
        + "".join(rows)
        + "</table>"
        + (f"<p><b>{esc(pref)}</b></p>" if pref else "")
    )


# ---------------------------------------------------------------- sections


def _order_keys(frame, group: str) -> list[str]:
    rows = frame[frame["group"] == group]
    order = rows.groupby("key")["chars"].max().sort_values(ascending=False)
    return [str(k) for k in order.index]


def _overview(report: Any, tokd: dict) -> str:
    corpus = getattr(report, "corpus", {}) or {}
    facts = [(k, corpus.get(k)) for k in ("documents", "chars", "bytes") if k in corpus]
    files = corpus.get("files")
    if isinstance(files, (list, dict)):
        facts.append(("files", len(files)))
    line = " \u00b7 ".join(f"{v:,} {k}" if isinstance(v, int) else f"{v} {k}" for k, v in facts)
    toks = "".join(
        f"<tr><td>{esc(d.label)}</td><td>{esc(d.kind)}</td>"
        f"<td class=num>{esc(d.vocab_size or '')}</td><td>{esc(d.spec)}</td></tr>"
        for d in tokd.values()
    )
    return (
        f"<p class=muted>corpus: {esc(line)}</p><table><tr><th>tokenizer</th><th>kind</th>"
        f"<th>vocabulary</th><th>spec</th></tr>{toks}</table>"
    )


def _gate_section(g: Any) -> str:
    head = "pass" if g.passed else "fail"
    rows = []
    for c in g.checks:
        iv = "none" if c.lo is None or c.hi is None else f"[{_fmt(c.lo, 3)}, {_fmt(c.hi, 3)}]"
        thr = "" if c.threshold is None else f"{c.direction} {c.threshold:g}"
        rows.append(
            f'<tr><td><span class="verdict {esc(c.verdict)}">{esc(c.verdict)}</span>'
            f"</td><td>{esc(c.tokenizer)}</td><td>{esc(c.name)}</td>"
            f"<td>{esc(c.group)}={esc(c.key)}</td><td class=num>{_fmt(c.value, 3)}</td>"
            f"<td class=num>{esc(iv)}</td><td>{esc(thr)}</td><td>{esc(c.note)}</td></tr>"
        )
    need = (
        "<p>uncertain: need more text (an interval straddles its threshold)</p>"
        if any(c.verdict == "uncertain" for c in g.checks)
        else ""
    )
    fails = sum(c.verdict != "pass" for c in g.checks)
    return (
        f"<h2>Gate checks</h2><details{' open' if head == 'fail' else ''}><summary>"
        f"{len(g.checks)} checks, {fails} not passed</summary>{need}"
        "<table><tr><th>verdict</th><th>tokenizer</th><th>check</th><th>row</th>"
        "<th>value</th><th>95% interval</th><th>threshold</th><th>note</th></tr>"
        + "".join(rows)
        + "</table></details>"
    )


def _evidence(ev: dict) -> str:
    items = []
    for k, v in ev.items():
        if k == "top_chars" and v:
            v = ", ".join(f"{c['code']} {c['name']} ({c['count']})" for c in v)
        elif k == "examples" and v:
            v = " | ".join(f"{e.get('before', '')} \u2192 {e.get('after', '')}" for e in v)
        elif isinstance(v, float):
            v = f"{v:.4g}"
        elif isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False)
        if v is not None and v != "" and v != []:
            items.append(f"<b>{esc(k)}</b>: {esc(v)}")
    return "<br>".join(items)


def _findings_section(findings: list, labels: list[str], table: list[dict] | None = None) -> str:
    """One collapsed <details> per (severity, rule, tokenizer), errors first; inside, a row
    per finding with its cause, fix and evidence."""
    if not findings:
        return "<h2>Findings</h2><p>No findings.</p>"
    groups = S.group_findings(findings, labels, table)
    by: dict[tuple, list] = {}
    for f in findings:
        by.setdefault((f.severity, f.rule, f.tokenizer), []).append(f)
    parts = [f"<h2>Findings ({len(findings)})</h2>"]
    for g in groups:
        items = ", ".join(f"{k} {g.values[k]}" if k in g.values else k for k in g.keys)
        unit = f" ({g.unit})" if g.unit else ""
        rows = "".join(
            f"<tr><td>{esc(f.group)}={esc(f.key)}</td><td>{esc(f.cause)}</td>"
            f"<td>{esc(f.fix)}</td><td class=muted>{_evidence(f.evidence)}</td></tr>"
            for f in by[(g.severity, g.rule, g.tokenizer)]
        )
        parts.append(
            f'<details><summary><span class=sev style="color:'
            f'{_SEV_COLOR.get(g.severity, "#111")}">{esc(g.severity)}</span> '
            f"<b>{esc(g.rule)}</b>{esc(unit)} {esc(g.tokenizer)} \u00b7 {len(g.keys)}: "
            f"{esc(items)}</summary><table><tr><th>row</th>"
            f"<th>cause</th><th>fix</th><th>evidence</th></tr>{rows}</table></details>"
        )
    return "\n".join(parts)


def _value(r, col: str, spec: str) -> str:
    """A frame value in a metric's format; "" when null or when the frame has no such
    column (a distribution metric of a frame measured without token ids)."""
    return fmt(r.get(col), spec, "")


def _table_section(frame, labels: list[str], scripts: list[str]) -> str:
    """Per script and tokenizer, the registry's HTML metrics (fertility.measure.metrics): the
    first with its interval, the others below it, muted."""
    if not labels or not scripts:
        return ""
    main, *more = shown("html")
    more = [m for m in more if m.name in frame.columns]  # none of it measured: no "n/a"s
    show = main.show("html")
    head = "".join(f"<th>{esc(lab)}</th>" for lab in labels)
    rows = frame[frame["group"] == "script"].set_index(["tokenizer", "key"])
    body = []
    for s in scripts:
        cells = []
        for lab in labels:
            if (lab, s) not in rows.index:
                cells.append("<td></td>")
                continue
            r = rows.loc[(lab, s)]
            value = _value(r, main.name, show.fmt)
            if show.interval and main.bounds is not None:
                lo, hi = (_value(r, c, show.fmt) for c in main.bounds)
                # a bound missing (too few documents for one): said, never "[, ]"
                value += f" [{lo}, {hi}]" if lo and hi else " (no interval)"
            notes = " \u00b7 ".join(
                f"{m.show('html').header} {_value(r, m.name, m.show('html').fmt) or 'n/a'}"
                for m in more
            )
            cells.append(
                f"<td class=num>{value}"
                + (f"<br><span class=muted>{notes}</span>" if notes else "")
                + "</td>"
            )
        body.append(f"<tr><th>{esc(s)}</th>{''.join(cells)}</tr>")
    title = show.header + (f" [{show.interval}]" if show.interval else "")
    return (
        f"<h2>Side by side: {esc(title)}</h2>"
        f"<table><tr><th>script</th>{head}</tr>{''.join(body)}</table>"
    )


# ---------------------------------------------------------------- charts


def _layout(title_y: str, **kw) -> dict:
    return dict(
        yaxis_title=title_y,
        barmode="group",
        height=460,
        template="plotly_white",
        margin={"l": 60, "r": 20, "t": 20, "b": 60},
        # below the x labels: a legend of many tokenizers above the plot covers its top
        legend={"orientation": "h", "y": -0.12, "yanchor": "top"},
        **kw,
    )


def _fig_cpt(frame, labels: list[str], scripts: list[str]):
    if not labels or not scripts:
        return None
    cpt = METRIC["chars_per_token"]  # the chart is of it, with its interval's columns
    fig = go.Figure()
    for i, lab in enumerate(labels):
        rows = frame[(frame["tokenizer"] == lab) & (frame["group"] == "script")]
        rows = rows.set_index("key").reindex(scripts)
        y = rows[cpt.name].astype(float)
        fig.add_bar(
            name=esc(lab),
            x=[esc(s) for s in scripts],
            y=y.tolist(),
            marker_color=_PALETTE[i % len(_PALETTE)],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": (rows[cpt.hi].astype(float) - y).tolist(),
                "arrayminus": (y - rows[cpt.lo].astype(float)).tolist(),
            },
        )
    fig.update_layout(**_layout("characters per token"))
    return fig


def _fig_share(frame, labels: list[str]):
    """Per language, its share of the tokens over its share of the characters, against the
    same ratio of the rest of the corpus (balance-inversion's ratio): 1 is even, 2 is twice
    the tokens per character of the rest. Bars by language: readable at any number of
    languages, where a scatter of shares piles the small ones' labels onto each other."""
    rows = frame[(frame["group"] == "language") & frame["tokenizer"].isin(labels)]
    if rows.empty:
        return None
    langs = _order_keys(rows, "language")
    fig = go.Figure()
    for i, lab in enumerate(labels):
        r = rows[rows["tokenizer"] == lab].set_index("key").reindex(langs)
        c, t = r["char_share"].astype(float), r["token_share"].astype(float)
        ratio = (t / c) / ((1 - t) / (1 - c))  # NaN where a language is the whole corpus
        fig.add_bar(
            name=esc(lab),
            x=[esc(k) for k in langs],
            y=[None if math.isnan(v) else v for v in ratio.tolist()],
            marker_color=_PALETTE[i % len(_PALETTE)],
            customdata=list(zip(c.tolist(), t.tolist())),
            hovertemplate="%{x}: %{y:.2f}x (%{customdata[0]:.1%} of the characters, "
            "%{customdata[1]:.1%} of the tokens)<extra>" + esc(lab) + "</extra>",
        )
    fig.add_hline(y=1, line={"color": "#999", "dash": "dot"})
    fig.update_layout(**_layout("tokens per character / the rest's", yaxis_rangemode="tozero"))
    return fig


def _fig_ceiling(frame, labels: list[str], families: list[str], scripts: list[str]):
    if not scripts or not (labels or families):
        return None
    fig = go.Figure()
    x = [esc(s) for s in scripts]
    for i, lab in enumerate(labels):
        rows = frame[(frame["tokenizer"] == lab) & (frame["group"] == "script")]
        rows = rows.set_index("key").reindex(scripts)
        color = _PALETTE[i % len(_PALETTE)]
        fig.add_bar(
            name=f"{esc(lab)}: actual", x=x, y=rows["chars_per_token"].tolist(), marker_color=color
        )
        fig.add_scatter(
            name=f"{esc(lab)}: own ceiling",
            x=x,
            y=rows["chars_per_pretoken"].tolist(),
            mode="markers",
            marker={
                "symbol": "line-ew-open",
                "size": 28,
                "color": color,
                "line": {"width": 3, "color": color},
            },
        )
    for j, fam in enumerate(families):
        rows = frame[(frame["tokenizer"] == fam) & (frame["group"] == "script")]
        rows = rows.set_index("key").reindex(scripts)
        fig.add_scatter(
            name=f"{esc(fam)} ceiling",
            x=x,
            y=rows["chars_per_token"].tolist(),
            mode="markers",
            marker={"symbol": "diamond", "size": 11, "color": _PALETTE[(j + 3) % len(_PALETTE)]},
        )
    # log: the ceilings of unspaced scripts (Thai, Kana: 15-25) would flatten the others
    ticks = [0.25, 0.5, 1, 2, 3, 5, 10, 20, 50]  # labelled, not the log axis's minor digits
    fig.update_layout(
        **_layout(
            "characters per token / per pre-token",
            yaxis={"type": "log", "tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]},
        )
    )
    return fig


def _fig_overlap(overlap: dict | None):
    """A tokenizer's pairwise language overlap (fertility.measure.card.overlap) as a
    heatmap: which languages share tokens, which have a vocabulary to themselves."""
    if not overlap or len(overlap.get("languages", [])) < 2:
        return None
    langs = [esc(x) for x in overlap["languages"]]
    fig = go.Figure(
        go.Heatmap(
            z=overlap["matrix"],
            x=langs,
            y=langs,
            zmin=0,
            zmax=1,
            colorscale="Blues",
            texttemplate="%{z:.2f}",
            hovertemplate="%{y} and %{x}: %{z:.3f}<extra></extra>",
            colorbar={"title": {"text": "overlap", "side": "right"}},
        )
    )
    side = 150 + 34 * len(langs)  # a cell tall enough for its two-digit value
    fig.update_layout(
        template="plotly_white",
        height=max(side, 320),
        width=max(side, 320) + 120,  # square cells, the colour bar beside them
        margin={"l": 60, "r": 20, "t": 20, "b": 60},
        yaxis={"autorange": "reversed"},  # the first language at the top, as in a table
    )
    return fig


# ---------------------------------------------------------------- samples

_RTL = {"Arab", "Hebr", "Syrc", "Thaa", "Nkoo", "Adlm", "Samr", "Mand", "Rohg", "Yezi"}


def tokens_html(text: str, spans: list, ids: list | None = None, token_bytes=None) -> str:
    """The text with one plain inline <span> per token, backgrounds alternating, escaped
    throughout; the token's id and bytes in its title (shown on hover).

    No box, padding, border or inline-block: any of them makes the browser shape each token
    on its own, so a Bengali vowel sign cut from its consonant would sit on a dotted circle
    and conjuncts would fall apart. A background does not break shaping, so the word reads
    as written. A token that begins with a combining mark is underlined in red ("mi");
    tokens that share a character (byte pieces) or cover none are drawn as one span with all
    their ids ("bp"), since half a character cannot be drawn.
    token_bytes: the tokenizer's id -> bytes; without it the title gives the text's UTF-8.
    """
    marks = U.is_mark_or_joiner(U.code_points(text))  # the frame's mark_initial definition
    groups: list[list] = []  # [start, end, token indices]
    cursor = 0
    for k, (s, e) in enumerate(spans):
        s, e = int(s), int(e)
        if groups and (s < cursor or e <= s):
            groups[-1][1] = max(groups[-1][1], e)
            groups[-1][2].append(k)
        else:
            groups.append([max(s, cursor), e, [k]])
        cursor = max(cursor, e)
    out, cursor = [], 0
    for n, (s, e, ks) in enumerate(groups):
        if s > cursor:
            out.append(esc(text[cursor:s]))
        piece = text[s:e] if e > s else ""
        cls = f"t{n % 2}" + (" bp" if len(ks) > 1 else "")
        if piece and marks[s]:
            cls += " mi"
        out.append(
            f'<span class="{cls}" title="{esc(_title(piece, ks, ids, token_bytes))}'
            f'">{esc(piece)}</span>'
        )
        cursor = max(cursor, e)
    if cursor < len(text):
        out.append(esc(text[cursor:]))
    return "".join(out)


def _title(piece: str, ks: list[int], ids: list | None, token_bytes) -> str:
    if ids is None:
        return f"bytes {piece.encode('utf-8').hex(' ')}"
    tid = [int(ids[k]) for k in ks]
    if token_bytes is None:
        return (
            f"token{'s' if len(tid) > 1 else ''} {', '.join(map(str, tid))}; text bytes "
            f"{piece.encode('utf-8').hex(' ')}"
        )
    return "; ".join(f"token {t}: bytes {token_bytes(t).hex(' ')}" for t in tid)


def _flagged(findings: list, samples: dict) -> dict[str, list[str]]:
    """Script -> the tokenizers flagged on it (findings' order: errors first), for the
    scripts some tokenizer has samples of; fragments (a script reported, not judged:
    docs/GATE.md "Running text") get no section."""
    have = {key for (_, key) in samples}
    out: dict[str, list[str]] = {}
    for f in sorted(findings, key=lambda f: S.SEVERITY_ORDER.get(f.severity, 9)):
        if f.group == "script" and f.key in have and "not_judged" not in f.evidence:
            labs = out.setdefault(f.key, [])
            if f.tokenizer not in labs:
                labs.append(f.tokenizer)
    return out


def _chosen(samples: dict, script: str, flagged: list[str], labels: list[str], n: int = 3):
    """Up to n documents of `script`, each once: the flagged tokenizers' samples first (each
    tokenizer keeps those that show its trouble there, fertility.measure.batch), taken in
    turn, then the others'."""
    pools = [samples.get((lab, script), []) for lab in flagged + labels]
    out: list[dict] = []
    seen: set[str] = set()
    for i in range(max((len(p) for p in pools), default=0)):
        for pool in pools:
            if i < len(pool) and pool[i]["text"] not in seen and len(out) < n:
                seen.add(pool[i]["text"])
                out.append(pool[i])
    return out


def _spans_of(text: str, lab: str, samples: dict, script: str, tok) -> dict | None:
    """`lab`'s tokens of `text`: from its own samples when it kept the same text, else
    encoded now by its loaded tokenizer (a measured report holds it); None without either."""
    for d in samples.get((lab, script), []):
        if d["text"] == text:
            return d
    if tok is None:
        return None
    ids, starts, ends, _ = tok.encode_flat([text])  # (a Flat: fertility.tokenizers.base)
    return {
        "text": text,
        "spans": [[int(a), int(b)] for a, b in zip(starts, ends)],
        "ids": [int(x) for x in ids],
    }


def _samples_section(report: Any, findings: list, labels: list[str]) -> str:
    samples = getattr(report, "samples", {}) or {}
    flagged = _flagged(findings, samples)
    if not flagged:
        return "<h2>Samples</h2><p class=muted>No script was flagged.</p>"
    legend = (
        "<p class=legend><span class=t0>token</span><span class=t1>next token</span>"
        '<span class="t0 mi">begins with a combining mark</span>'
        "<span class=bp>a character spelled in byte pieces (several tokens)</span> "
        "<span class=muted>(hover a token for its id and bytes)</span></p>"
        "<p class=muted>Per flagged script, the documents in it with the most tokens per "
        "character for the flagged tokenizer (its marks starting tokens, its byte pieces), "
        "each shown once and tokenized by every tokenizer.</p>"
    )
    parts = ["<h2 id=samples>Samples of flagged scripts, token by token</h2>", legend]
    infos = {d.label: d for d in getattr(report, "tokenizers", [])}
    # the loaded tokenizers (a measured report holds them) spell each id's bytes
    live = {
        lab: d.tokenizer.token_bytes
        for lab, d in infos.items()
        if d.kind != PRETOKENIZER and d.tokenizer is not None
    }
    real = {lab for lab, d in infos.items() if d.kind != PRETOKENIZER}
    for script, who in flagged.items():
        direction = "rtl" if script in _RTL else "ltr"
        parts.append(
            f'<h3 id="sample-{esc(script)}">{esc(script)} '
            f"<span class=muted>(flagged: {esc(', '.join(who))})</span></h3>"
        )
        for doc in _chosen(samples, script, who, labels):
            cells = []
            for lab in labels:
                d = infos.get(lab)
                got = _spans_of(doc["text"], lab, samples, script, getattr(d, "tokenizer", None))
                if got is None:
                    continue
                more = " \u2026" if doc.get("truncated") else ""
                toks = tokens_html(
                    got["text"],
                    got["spans"],
                    got.get("ids") if lab in real else None,
                    live.get(lab),
                )
                cells.append(
                    f"<div><h4>{esc(lab)} \u00b7 {len(got['spans'])} tokens</h4>"
                    f'<div class=toks dir="{direction}">{toks}{more}</div></div>'
                )
            parts.append(
                f'<div class=cmp style="grid-template-columns:repeat({len(cells)},'
                f'minmax(0,1fr))">{"".join(cells)}</div>'
            )
    return "\n".join(parts)
