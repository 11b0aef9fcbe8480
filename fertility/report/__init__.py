"""Renderers of a measured Report: a terminal table and CSV here, JSON on the Report itself,
HTML in fertility.report.html. They only format what the frame holds; nothing recounts."""

from __future__ import annotations

import io
import math

import pandas as pd

_TABLE_COLUMNS = [
    # (header, column, format)
    ("docs", "documents", "{:d}"),
    ("chars/tok", "chars_per_token", "{:.2f}"),
    ("95% CI", None, None),
    ("graph/tok", "graphemes_per_token", "{:.2f}"),
    ("bytes/tok", "bytes_per_token", "{:.2f}"),
    ("tok/word", "tokens_per_word", "{:.2f}"),
    ("split words", "continued_word_rate", "{:.1%}"),
    ("byte-fb", "byte_fallback_rate", "{:.2%}"),
    ("unk", "unk_rate", "{:.2%}"),
    ("tok share", "token_share", "{:.1%}"),
    ("byte share", "byte_share", "{:.1%}"),
    ("ceiling", "chars_per_pretoken", "{:.2f}"),
    ("rt fail", "roundtrip_failure_rate", "{:.1%}"),
]


def _fmt(value, spec: str) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return spec.format(int(value) if spec == "{:d}" else value)


def _grid(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(  # noqa: E731
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def corpus_lines(corpus: dict) -> list[str]:
    out = [f"corpus: {corpus['documents']} documents, {corpus['chars']:,} chars, "
           f"{corpus['bytes']:,} bytes from {len(corpus['files'])} files"]
    if corpus.get("sample") is not None or corpus.get("max_docs") is not None:
        out.append(f"  subset: sample={corpus.get('sample')} max_docs={corpus.get('max_docs')} "
                   f"seed={corpus.get('seed')}: read {corpus['documents']} of "
                   f"{corpus['documents_seen']} documents seen"
                   + (f", stopped at {corpus['stopped_at']}" if corpus.get("stopped_early")
                      else ""))
    if corpus.get("skipped_files"):
        out.append(f"  skipped {len(corpus['skipped_files'])} files (see --format json)")
    if corpus.get("binary_files"):
        out.append(f"  skipped {len(corpus['binary_files'])} binary files")
    bad = corpus.get("invalid_utf8") or {}
    if bad:
        out.append(f"  invalid UTF-8 replaced in {len(bad)} files: {sum(bad.values())} in all")
    return out


def render_table(report) -> str:
    parts = corpus_lines(report.corpus)
    frame = report.frame
    for t in report.tokenizers:
        sub = frame[frame["tokenizer"] == t["label"]]
        title = (f"\n{t['label']}  ({t['kind']}, vocab {t['vocab_size']})"
                 if t["kind"] != "pretokenizer"
                 else f"\n{t['label']}  (pre-tokenizer ceiling: each pre-token counted as a token)")
        rows = []
        for r in sub.to_dict(orient="records"):
            cells = [f"{r['group']}:{r['key']}" if r["group"] != "all" else "all"]
            for header, col, spec in _TABLE_COLUMNS:
                if header == "95% CI":
                    lo, hi = r["chars_per_token_lo"], r["chars_per_token_hi"]
                    cells.append("-" if math.isnan(lo) else f"{lo:.2f}-{hi:.2f}")
                else:
                    cells.append(_fmt(r[col], spec))
            rows.append(cells)
        parts += [title, _grid(["group"] + [h for h, _, _ in _TABLE_COLUMNS], rows)]
    if report.findings:
        parts.append("\nfindings:")
        for f in report.findings:
            parts.append(f"  [{f.severity}] {f.rule} {f.tokenizer} {f.group}:{f.key}: {f.cause}")
            parts.append(f"      fix: {f.fix}")
    return "\n".join(parts) + "\n"


def render_csv(report) -> str:
    buf = io.StringIO()
    report.frame.to_csv(buf, index=False)
    return buf.getvalue()
