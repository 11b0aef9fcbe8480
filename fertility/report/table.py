"""The one text-table layout (terminal report, gate verdict, `fertility eval`) and the
terminal's width."""

from __future__ import annotations

import shutil

from fertility.errors import visible

GAP = "  "


def terminal_width() -> int:
    """COLUMNS, else the terminal's width, else 120 (output to a file or a pipe)."""
    return shutil.get_terminal_size((120, 40)).columns


def grid(
    headers: list[str],
    rows: list[list[str]],
    spans: list[tuple[str, int]] | None = None,
    *,
    left: int = 1,
) -> list[str]:
    """Left-aligned first `left` columns (names), right-aligned numbers. `spans`: a title over
    each run of columns (the tokenizer's label over its own columns), widened to hold it.
    Every cell, header and title is shown `visible` (a label comes from the data: a newline
    or U+202E in it would break or reorder the table)."""
    headers = [visible(h) for h in headers]
    rows = [[visible(c) for c in r] for r in rows]
    spans = [(visible(t), n) for t, n in spans] if spans else spans
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = []
    if spans:
        pos, titles = 0, []
        for title, n in spans:
            inner = sum(widths[pos : pos + n]) + len(GAP) * (n - 1)
            if len(title) > inner:  # widen the run's last column so the label fits whole
                widths[pos + n - 1] += len(title) - inner
                inner = len(title)
            titles.append(title.center(inner) if n > 1 else title.rjust(inner))
            pos += n
        out.append(GAP.join(titles).rstrip())

    def line(cells):
        return GAP.join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    out += [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]
    return out
