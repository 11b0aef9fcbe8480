"""Renderers of a measured Report: the terminal report and CSV here, JSON on the Report itself,
HTML in fertility.report.html. They only format what the report's table holds; nothing recounts.

The terminal report reads top to bottom: the verdict of each tokenizer (fertility.report.summary),
one table with the tokenizers side by side, the findings one line per (rule, tokenizer).
The table fits the terminal's width: it drops its less useful columns first and, when even the
few it keeps are too wide, wraps tokenizers onto further tables. A number is never cut.
"""

from __future__ import annotations

import io
import textwrap

import numpy as np

from fertility.errors import visible
from fertility.findings import not_judged
from fertility.gate import evaluate
from fertility.measure.counters import COUNTS
from fertility.measure.frame import add_metrics
from fertility.measure.metrics import METRICS, Metric, shown
from fertility.numbers import finite, fmt
from fertility.policy import Policy, default_policy
from fertility.report import summary as S
from fertility.report import table as T
from fertility.report.table import GAP, grid, terminal_width
from fertility.tokenizers.pretokenizer import PRETOKENIZER


def _columns(metrics) -> list[tuple[str, Metric, bool]]:
    """(header, metric, is its interval) per column: each metric's value, then its interval
    where the registry shows it (fertility.measure.metrics.Show)."""
    out = []
    for m in metrics:
        show = m.show("table")
        out.append((show.header, m, False))
        if show.interval and m.lo is not None:
            out.append((show.interval, m, True))
    return out


# The registry's table metrics, most useful first: the default table keeps as many as fit.
_COLUMNS = _columns(shown("table"))
# the essential ones (chars/token and its interval: what the table is for) are never dropped
_MIN_COLUMNS = len(_columns(m for m in shown("table") if m.show("table").essential))
# the same for every tokenizer (they all read the same documents): shown once, left, after
# the documents
_SHARED = [("docs", "documents", "{:,.0f}")] + [
    (m.show("table").header, m.name, m.show("table").fmt) for m in shown("table", shared=True)
]


def _cell(r: dict | None, col: str, spec: str) -> str:
    return "-" if r is None else fmt(r.get(col), spec)


def _metric_cell(r: dict | None, m: Metric, interval: bool) -> str:
    """A metric's value, or its interval as lo-hi ("-" when either bound is null)."""
    spec = m.show("table").fmt
    if not interval:
        return _cell(r, m.name, spec)
    if m.bounds is None:
        raise ValueError(f"metric {m.name} has no interval")
    lo, hi = (_cell(r, c, spec) for c in m.bounds)
    return "-" if "-" in (lo, hi) else f"{lo}-{hi}"


def corpus_lines(corpus: dict) -> list[str]:
    out = [
        (
            f"corpus: {corpus['documents']:,} documents, {corpus['chars']:,} chars, "
            f"{corpus['bytes']:,} bytes from {len(corpus['files'])} files"
        )
    ]
    if any(corpus.get(k) is not None for k in ("sample", "max_docs", "precision")):
        subset = corpus.get("subset") or {}
        out.append(
            f"  subset: {subset['statement']}"
            if subset.get("statement")
            else f"  subset: read {corpus['documents']:,} of "
            f"{corpus['documents_seen']:,} documents seen"
        )
    if corpus.get("skipped_files"):
        out.append(f"  skipped {len(corpus['skipped_files'])} files (see --format json)")
    if corpus.get("binary_files"):
        out.append(f"  skipped {len(corpus['binary_files'])} binary files")
    bad = corpus.get("invalid_utf8") or {}
    if bad:
        out.append(f"  invalid UTF-8 replaced in {len(bad)} files: {sum(bad.values()):,} in all")
    return out


# ---------------------------------------------------------------- the side-by-side table


def _rows(table: list[dict], labels: list[str], min_share: float, judged: set[str]):
    """Row keys in order (all, languages, scripts) and the scripts folded into "other
    scripts": those under `min_share` of the characters that the gate does not judge either
    (`judged`: a script judged by its own language's text keeps its row)."""
    first = [r for r in table if r["tokenizer"] == labels[0]]
    of = lambda group: [r for r in first if r["group"] == group]
    # char_share: of the corpus (weighted when --precision drew languages apart); null: 0
    share = {str(r["key"]): finite(r["char_share"]) for r in of("script")}
    small = sorted(k for k, c in share.items() if (c or 0.0) < min_share and k not in judged)
    big = sorted(k for k in share if k not in small)
    langs = sorted(str(r["key"]) for r in of("language"))
    keys = [("all", str(r["key"])) for r in of("all")]
    return keys + [("language", k) for k in langs] + [("script", k) for k in big], small


def _folded(table: list[dict], label: str, small: list[str]) -> dict:
    """The "other" row of one tokenizer (the small scripts): counts summed, then every metric derived as
    the table's own are (fertility.measure.frame.add_metrics, on one-row columns); no
    chars/token interval (it is no single script's: the delta method needs the per-document
    sums). Its shares of the all row are the rows' shares added up: the same where nothing is
    weighted, and the corpus's where --precision weighted the rows (counters.Weighted)."""
    mine = [r for r in table if r["tokenizer"] == label]
    sub = [r for r in mine if r["group"] == "script" and str(r["key"]) in small]
    allrow = next((r for r in mine if r["group"] == "all"), {})
    cols: dict = {c: np.array([sum((r.get(c, 0) for r in sub), 0)], dtype=np.int64) for c in COUNTS}
    # a script with a token-id histogram: the tokenizer has a vocabulary (no pre-tokenizer)
    has_vocab = any(finite(r.get("unique_tokens")) is not None for r in sub)
    add_metrics(cols, totals=allrow, has_vocab=has_vocab)
    out = {name: np.asarray(col)[0].item() for name, col in cols.items()}
    for m in METRICS:
        if m.of_all and m.name in table[0]:  # every row has the same columns
            # a null share counts 0; numpy's sum, in numpy's order (pandas' sum is the same)
            out[m.name] = float(np.nansum(np.array([r[m.name] for r in sub], dtype=float)))
    return out


def _header_width(header: str, data: int, wrap: bool) -> int:
    return max(T.cells(x) for x in (T.wrap_header(header, max(data, 1)) if wrap else [header]))


def _chunks(
    labels: list[str], ncols: int, fixed: int, widths: dict, width: int
) -> list[list[tuple[str, int]]]:
    """Split the (tokenizer, column) cells into tables that each fit `width` after the
    `fixed` columns. A tokenizer's columns stay together unless they alone are too wide;
    a table holds at least one cell, so nothing is ever cut."""
    chunks: list[list[tuple[str, int]]] = []
    cur: list[tuple[str, int]] = []
    used = fixed
    for lab in labels:
        cols = [(lab, j) for j in range(ncols)]
        block = max(sum(widths[j] + len(GAP) for j in range(ncols)), T.cells(lab) + len(GAP))
        if cur and used + block > width:
            chunks.append(cur)
            cur, used = [], fixed
        if block <= width - fixed or not cols:
            cur, used = cur + cols, used + block
            continue
        for cell in cols:  # one tokenizer wider than the terminal: its columns wrap
            w = widths[cell[1]] + len(GAP)
            if cur and used + w > width:
                chunks.append(cur)
                cur, used = [], fixed
            cur.append(cell)
            used += w
    return chunks + [cur] * bool(cur)


def table_lines(
    report,
    *,
    min_share: float = 0.0,
    width: int | None = None,
    verbose: bool = False,
    min_size: tuple[int, int] = (Policy.min_chars, Policy.min_documents),
) -> list[str]:
    """The tokenizers side by side, one row per language and script. Default: the most
    useful columns that fit `width` for every tokenizer at once (at least chars/token and its
    interval); verbose: every column. What does not fit wraps onto another table.
    min_share, min_size: the policy's min_share and (min_chars, min_documents): a script
    under min_share of the characters folds into "other" unless the gate judges it."""
    width = width or terminal_width()
    table = report.table
    labels = [t.label for t in report.tokenizers]
    if not labels or not table:
        return []
    skipped = not_judged(report, min_share, *min_size) if min_share else {}
    scripts = [r["key"] for r in table if r["tokenizer"] == labels[0] and r["group"] == "script"]
    judged = {str(k) for k in scripts if (labels[0], str(k)) not in skipped}
    keys, small = _rows(table, labels, min_share, judged)
    by = {(str(r["tokenizer"]), r["group"], str(r["key"])): r for r in table}
    folded = {lab: _folded(table, lab, small) for lab in labels} if small else {}
    # a label comes from the data (a file name, a --lang-field value): escaped before the
    # widths are taken, so a control or bidi character neither prints raw nor skews a column
    names = [visible("all" if g == "all" else f"{g}:{k}") for g, k in keys]
    if small:
        names.append(f"other ({len(small)})")  # (short: the name column sets every table's width)

    def rec(lab, g, k):
        return by.get((lab, g, k))

    def records(lab):
        return [rec(lab, g, k) for g, k in keys] + ([folded[lab]] if small else [])

    shared = [[_cell(r, col, spec) for _, col, spec in _SHARED] for r in records(labels[0])]
    cells = {
        lab: [[_metric_cell(r, m, iv) for _, m, iv in _COLUMNS] for r in records(lab)]
        for lab in labels
    }
    data = {
        j: max(T.cells(c[j]) for lab in labels for c in cells[lab]) for j in range(len(_COLUMNS))
    }
    fixed = max(T.cells(n) for n in names + ["group"]) + sum(
        len(GAP) + max(T.cells(h), *(T.cells(s[i]) for s in shared))
        for i, (h, _, _) in enumerate(_SHARED)
    )

    def layout(wrap: bool):
        """(columns kept, tables) with headers on one line or wrapped."""
        widths = {
            j: max(data[j], _header_width(_COLUMNS[j][0], data[j], wrap))
            for j in range(len(_COLUMNS))
        }
        ncols = len(_COLUMNS)
        if not verbose:  # drop low-value columns until every tokenizer fits in one table
            while ncols > _MIN_COLUMNS and len(_chunks(labels, ncols, fixed, widths, width)) > 1:
                ncols -= 1
        return ncols, _chunks(labels, ncols, fixed, widths, width)

    wrap = False
    ncols, chunks = layout(False)
    wrapped = layout(True)
    if (wrapped[0], -len(wrapped[1])) > (ncols, -len(chunks)):  # wrapping shows more
        wrap, (ncols, chunks) = True, wrapped
    out: list[str] = []
    for chunk in chunks:
        spans: list[list] = [["", 1 + len(_SHARED)]]
        for lab, _ in chunk:
            if spans[-1][0] == lab and len(spans) > 1:
                spans[-1][1] += 1
            else:
                spans.append([lab, 1])
        headers = ["group"] + [h for h, _, _ in _SHARED] + [_COLUMNS[j][0] for _, j in chunk]
        rows = [
            [names[i]] + shared[i] + [cells[lab][i][j] for lab, j in chunk]
            for i in range(len(names))
        ]
        out += ([""] if out else []) + grid(headers, rows, [tuple(s) for s in spans], wrap=wrap)
    if ncols < len(_COLUMNS):
        gone = ", ".join(dict.fromkeys(f'"{h}"' for h, _, _ in _COLUMNS[ncols:]))
        out += textwrap.wrap(
            f"left out to fit {width} columns: {gone} (-v shows every column, "
            "--format json/csv every value)",
            width,
            break_long_words=False,
        )
    if small:
        out += textwrap.wrap(
            f"other: the scripts {' '.join(small)}, each under {min_share:.0%} of the "
            "characters (every row is in --format json/csv)",
            width,
            break_long_words=False,
        )
    return out


# ---------------------------------------------------------------- the whole report


def render_table(
    report, *, policy=None, width: int | None = None, verbose: bool = False, verdicts: bool = True
) -> str:
    """The terminal report. `policy` (a fertility.policy.Policy) gives the verdicts and the
    folding threshold; without one, the built-in policy. verdicts=False (--no-diagnose: no
    findings to weigh) leaves the summary out."""

    policy = policy or default_policy()
    width = width or terminal_width()
    parts = corpus_lines(report.corpus)
    real = [t.label for t in report.tokenizers if t.kind != PRETOKENIZER]
    families = [t.label for t in report.tokenizers if t.kind == PRETOKENIZER]
    if real:
        parts += _items(
            "tokenizers: ",
            [
                f"{t.label} ({t.kind}, vocab {t.vocab_size:,})"
                for t in report.tokenizers
                if t.kind != PRETOKENIZER
            ],
            width,
        )
    if real and verdicts:
        parts += [""] + summary_lines(report, policy, width, verbose)
    if families:
        parts.append(
            f"pre-tokenizer ceilings ({', '.join(families)}): each pre-token counted as a token"
        )
    parts += [""] + table_lines(
        report,
        min_share=policy.min_share,
        width=width,
        verbose=verbose,
        min_size=(policy.min_chars, policy.min_documents),
    )
    parts += findings_lines(
        report.findings or [], [t.label for t in report.tokenizers], width, verbose, report.table
    )
    # every line visible (the tables already are): nothing from the data reaches the
    # terminal raw, whichever line carries it
    return "\n".join(visible(line) for part in parts for line in part.split("\n")) + "\n"


def _items(head: str, items: list[str], width: int) -> list[str]:
    """`head` and the items joined by "; ", onto further indented lines at the width (an item
    is never split: a label is one word to a reader)."""
    out = [head]
    for i, item in enumerate(items):
        piece = item + ("; " if i < len(items) - 1 else "")
        if i and T.cells(out[-1] + piece.rstrip()) > width:
            out.append("  ")
        out[-1] += piece
    return [x.rstrip() for x in out]


def summary_lines(report, policy, width: int, verbose: bool = False) -> list[str]:
    """The gate's verdict per tokenizer, one line each, what its counts are, and which one to
    prefer."""

    result = evaluate(report, policy, findings=report.findings)
    vs = S.verdicts(report, result)
    pref = S.preference(vs)
    # scripts reported, not judged (fragments: docs/GATE.md "Running text"), once each
    first: dict[str, str] = {}  # the first tokenizer's reason: the text is the same
    for sk in result.skipped:
        first.setdefault(str(sk["key"]), str(sk["reason"]))
    notes = [f"not judged: {key}: {reason}" for key, reason in first.items()]
    if result.premium_note:  # why the premium column is empty, or partly
        notes.append(result.premium_note)
    return (
        S.verdict_table(vs, width, verbose)
        + S.wrap_text(S.verdict_legend(result.policy.fail_on), width)
        + [line for n in notes for line in S.wrap_text(n, width)]
        + (S.wrap_text(pref, width) if pref else [])
    )


def findings_lines(
    findings: list, labels: list[str], width: int, verbose: bool, table: list[dict] | None = None
) -> list[str]:
    if not findings:
        return []
    if verbose:
        out = ["", f"findings ({len(findings)}):"]
        wrap = textwrap.TextWrapper(
            width=max(width, 40),
            subsequent_indent=" " * 6,
            break_long_words=False,
            break_on_hyphens=False,
        )
        for f in findings:
            ev = "; ".join(f"{k}={v}" for k, v in f.evidence.items() if v not in (None, "", []))
            for text in (
                f"  [{f.severity}] {f.rule} {f.tokenizer} {f.group}:{f.key}: {f.cause}",
                f"      evidence: {ev}",
                f"      fix: {f.fix}",
            ):
                out += wrap.wrap(visible(text))
        return out
    groups = S.group_findings(findings, labels, table)
    return (
        [""]
        + S.wrap_text(S.findings_head(findings, len(groups)), width)
        + [visible(x) for x in S.group_lines(groups, width)]
    )


def render_csv(report) -> str:
    # every row with every column: the frame's CSV (--format csv may import pandas)
    buf = io.StringIO()
    report.frame.to_csv(buf, index=False)
    return buf.getvalue()
