"""The one text-table layout (terminal report, gate verdict, `fertility eval`), the terminal's
width, and the width of text on it in cells.

A terminal draws an East Asian wide or fullwidth character (CJK, Hangul, fullwidth forms) in
two cells and a combining mark or a zero-width format character in none, so `len` is not a
width: every column and every "fits" here counts cells (`cells`), which equals the C library's
wcswidth on every word of the real-world text (tests/report/test_cells.py). Not `rich.table`:
rich 15.0 counts a Bengali or Devanagari word by grapheme clusters ('বাংলা ভাষা' 5 cells
against wcswidth's 10), so its columns would drift under the labels this tool exists for."""

from __future__ import annotations

import shutil
import textwrap
import unicodedata

from fertility.errors import visible

GAP = "  "


def terminal_width() -> int:
    """COLUMNS, else the terminal's width, else 120 (output to a file or a pipe)."""
    return shutil.get_terminal_size((120, 40)).columns


def cells(text: str) -> int:
    """Terminal cells `text` takes: 2 for East Asian wide (W) and fullwidth (F) characters,
    0 for combining marks (Mn, Me) and format characters (Cf: ZWJ, ZWNJ), 1 for the rest."""
    if text.isascii():  # nearly every cell: numbers and labels
        return len(text)
    n = 0
    for ch in text:
        if unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def ljust(text: str, width: int) -> str:
    return text + " " * (width - cells(text))


def rjust(text: str, width: int) -> str:
    return " " * (width - cells(text)) + text


def center(text: str, width: int) -> str:
    pad = width - cells(text)
    return " " * (pad // 2) + text + " " * (pad - pad // 2)


def wrap_header(header: str, width: int) -> list[str]:
    """`header` on as many lines as it needs to fit `width` cells, broken at spaces only (a
    word longer than `width` stays whole: the column widens to it)."""
    lines: list[str] = []
    for word in header.split(" "):
        if lines and cells(lines[-1]) + 1 + cells(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def grid(
    headers: list[str],
    rows: list[list[str]],
    spans: list[tuple[str, int]] | None = None,
    *,
    left: int = 1,
    wrap: bool = False,
    room: int | None = None,
) -> list[str]:
    """Left-aligned first `left` columns (names), right-aligned numbers. `spans`: a title over
    each run of columns (the tokenizer's label over its own columns), widened to hold it.
    wrap: a header wider than its column's cells goes onto several lines (bottom-aligned)
    instead of widening the column; room: the width the table may take, spent on the
    headers of most lines first (fewer header lines). Every cell, header and title is shown `visible` (a label
    comes from the data: a newline or U+202E in it would break or reorder the table)."""
    headers = [visible(h) for h in headers]
    rows = [[visible(c) for c in r] for r in rows]
    spans = [(visible(t), n) for t, n in spans] if spans else spans
    data = [max([0] + [cells(r[i]) for r in rows]) for i in range(len(headers))]
    if wrap:
        heads = [wrap_header(h, max(d, 1)) for h, d in zip(headers, data)]
    else:
        heads = [[h] for h in headers]
    widths = [max([d] + [cells(x) for x in hs]) for d, hs in zip(data, heads)]
    while wrap and room is not None:  # widen the tallest header while the table fits
        total = sum(widths) + len(GAP) * (len(widths) - 1)
        i = max(range(len(heads)), key=lambda i: len(heads[i]))
        if len(heads[i]) < 2:
            break
        w = widths[i] + 1
        while len(wrap_header(headers[i], w)) >= len(heads[i]):
            w += 1
        if total + w - widths[i] > room:
            break
        heads[i], widths[i] = wrap_header(headers[i], w), w
    out = []
    if spans:
        pos, titles = 0, []
        for title, n in spans:
            inner = sum(widths[pos : pos + n]) + len(GAP) * (n - 1)
            if cells(title) > inner:  # widen the run's last column so the label fits whole
                widths[pos + n - 1] += cells(title) - inner
                inner = cells(title)
            titles.append(center(title, inner) if n > 1 else rjust(title, inner))
            pos += n
        out.append(GAP.join(titles).rstrip())

    def line(row):
        return GAP.join(
            ljust(c, w) if i < left else rjust(c, w) for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()

    depth = max(len(hs) for hs in heads)
    for k in range(depth):  # bottom-aligned: the last line of every header is the last row
        out.append(
            line([(hs[k - depth + len(hs)] if k >= depth - len(hs) else "") for hs in heads])
        )
    out += [line(["-" * w for w in widths])] + [line(r) for r in rows]
    return out


def width_of(lines: list[str]) -> int:
    return max((cells(x) for x in lines), default=0)


def fit_grid(
    headers: list[str],
    rows: list[list[str]],
    width: int,
    *,
    left: int = 1,
    keep: int = 2,
    verbose: bool = False,
) -> list[str]:
    """`grid` within `width` cells: as it is if it fits, else with its headers wrapped, else
    (the columns being in order of use) without its last columns, down to the first `keep`,
    followed by one line naming what was left out and how to see it. verbose: nothing is
    left out; the columns past the width go to a further table that repeats the first
    `left` columns, so every cell is shown within the width."""
    table = grid(headers, rows, left=left)
    if width <= 0 or width_of(table) <= width:  # (0: no width, as for a log)
        return table
    table = grid(headers, rows, left=left, wrap=True, room=width)
    if width_of(table) <= width:
        return table
    n = len(headers)
    if verbose:  # every column, in as many tables as the width needs
        out: list[str] = []
        start = left
        while start < n:
            end = start + 1
            while end < n and width_of(_part(headers, rows, left, start, end + 1, width)) <= width:
                end += 1
            out += ([""] if out else []) + _part(headers, rows, left, start, end, width)
            start = end
        return out
    while (
        n > keep
        and width_of(grid(headers[:n], [r[:n] for r in rows], left=left, wrap=True)) > width
    ):
        n -= 1
    table = grid(headers[:n], [r[:n] for r in rows], left=left, wrap=True, room=width)
    if n < len(headers):
        gone = ", ".join(f'"{h}"' for h in headers[n:])
        table += textwrap.wrap(
            f"(left out to fit {width} columns: {gone}; -v shows them, --format json every value)",
            width,
            break_long_words=False,
        )
    return table


def _part(headers, rows, left, start, end, room=None) -> list[str]:
    cols = list(range(left)) + list(range(start, end))
    return grid(
        [headers[i] for i in cols],
        [[r[i] for i in cols] for r in rows],
        left=left,
        wrap=True,
        room=room,
    )
