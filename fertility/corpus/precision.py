"""A corpus read in a seeded random order of blocks, for `--precision` (issue #22).

`BlockOrder(corpus, seed)` reads the same files as `corpus` but cuts them into units and
reads the units in a random order drawn from the seed, so a pass stopped at any point has
read a random sample of blocks from every file and language: never a prefix. When files name
the languages, each language (stratum) has a random order of its own and the order deals
the languages in turn; a language the measuring side closes (`done`) is skipped from then on.

Units
    an uncompressed `.txt` or `.jsonl` file: blocks of BLOCK_BYTES bytes; a block holds the
    lines whose first byte lies in it (a line crossing its end is read whole, by this
    block; the next block starts after it), so every line is read exactly once. Lines are
    found by `\\n`: a file whose lines end with a lone `\\r` is one block.
    an uncompressed `.parquet` file: its row groups.
    anything else (a compressed file, `whole_files`): the whole file, one unit.

Each unit is given out as its own batches (`doc_batches`): a batch never mixes units, so
fertility.measure.precision can sum each block as one cluster of the sample. A document's
`line` is its line number within its block for text and jsonl blocks (the block's place in
the file is not counted, so no read of what comes before is needed), its row number in the
file for parquet. `summary()` is the corpus's, with the files and counts of what was read.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import closing
from typing import Any, NamedTuple

import numpy as np

from fertility.corpus import Corpus, DocBatch, file_entry, remote
from fertility.corpus import formats as fmt
from fertility.corpus.walk import CorpusFile
from fertility.errors import CorpusError

# 16 KB: tens of documents of real text. A language's interval needs MIN_CLUSTERS blocks
# whatever their size, so the block size sets the least a language costs (30 x 16 KB): drawn in
# proportion, with 64 KB the 13 fixture languages at 1% read 499 blocks (32 MB) although every
# half-width was already 0.2-0.7%; with 16 KB, 737 blocks (12 MB), half-widths 0.3-1.0%, half
# the time (benchmarks/RESULTS.md, stop 41); drawn apart, most languages stop at that floor
# (stop 44). Smaller blocks help more where neighbouring documents agree (one site, one topic):
# a block then counts as one observation whatever its size.
BLOCK_BYTES = 1 << 14


class Unit(NamedTuple):
    file: int  # index in corpus.files
    start: int  # byte offset (txt, jsonl), row group (parquet); 0 for a whole file
    end: int  # byte offset; -1: a row group or a whole file


class BlockOrder:
    """`corpus` read a unit at a time in a seeded random order (see the top).

    Strata: when languages are named by files, each label is a stratum and the order deals
    the strata in turn (the r-th unit of every stratum, in random order, before any stratum's
    (r+1)-th), each stratum's units in a random order; a stratum in `done` (set by
    fertility.measure.precision while the pass runs) is skipped from then on. With labels
    read from records there is one stratum, and the order is a plain random permutation."""

    def __init__(self, corpus: Corpus, seed: int):
        self.corpus = corpus
        # The order as three arrays, a unit's file, its number in the file and its stratum
        # (16 bytes a unit, not a Python tuple's ~170: 10 GB is 610,000 units of 16 KB):
        # Unit k is made when it is read (`unit`).
        counts = np.array([_count(corpus, i, cf) for i, cf in enumerate(corpus.files)], np.int64)
        total = int(counts.sum())
        unit_file = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        unit_part = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        labels = [cf.lang or "und" for cf in corpus.files]
        # per stratum its name: the files' labels, or one stratum ("") of every language
        self.strata: list[str] = [""] if corpus.lang_field else sorted(set(labels)) or [""]
        number = {name: i for i, name in enumerate(self.strata)}
        of_file = np.array([number.get(x, 0) for x in labels] or [0], np.int32)
        unit_stratum = of_file[unit_file] if total else np.zeros(0, np.int32)
        order = np.random.default_rng(seed).permutation(total)
        if len(self.strata) > 1:  # deal the strata in turn: by each unit's rank in its stratum
            s = unit_stratum[order]
            by = np.argsort(s, kind="stable")
            size = np.bincount(s, minlength=len(self.strata))
            rank = np.empty(total, np.int64)
            rank[by] = np.arange(total) - np.repeat(np.cumsum(size) - size, size)
            order = order[np.argsort(rank, kind="stable")]
        self.file, self.part = unit_file[order], unit_part[order]
        self.stratum = unit_stratum[order]
        self.units_in = np.bincount(unit_stratum, minlength=len(self.strata))  # per stratum
        self.done: set[int] = set()  # strata not to read further (the measuring thread's)
        self.drawn: list[int] = []  # the order's positions read, in order (skipped ones not)
        self.batch_unit: list[int] = []  # batch number -> the unit it came from
        self.batch_last: list[bool] = []  # batch number -> whether its unit's last batch

    @property
    def by_label(self) -> bool:
        """Whether the strata are the files' labels (each a language), read in turn."""
        return not self.corpus.lang_field

    def __len__(self) -> int:  # units
        return len(self.file)

    def unit(self, k: int) -> Unit:
        """The k-th unit of the order."""
        i, part = int(self.file[k]), int(self.part[k])
        cf = self.corpus.files[i]
        if _whole(self.corpus, cf) or cf.format == "parquet":
            return Unit(i, part, -1)
        start = part * BLOCK_BYTES
        return Unit(i, start, min(start + BLOCK_BYTES, cf.size))

    def sizes(self) -> dict[str, int]:
        return self.corpus.sizes()

    def summary(self) -> dict:
        return self.corpus.summary()

    def doc_batches(self, size: int, max_chars: int) -> Iterator[DocBatch]:
        """Each unit's documents, in batches of at most `size` documents and about
        `max_chars` characters, never mixing two units; `batch_unit` and `batch_last` say
        each batch's unit, and whether the unit ends with it, when it is given out."""
        corpus = self.corpus
        run = corpus._pass = type(corpus._pass)()  # a fresh pass's counters, as summary() reads
        entries: dict[int, Any] = {}  # file -> its summary()["files"] entry
        for k in range(len(self)):
            if int(self.stratum[k]) in self.done:
                continue
            self.drawn.append(k)
            unit = self.unit(k)
            cf = corpus.files[unit.file]
            if unit.file not in entries:
                entries[unit.file] = file_entry(cf)
                run.files.append(entries[unit.file])
            stats = fmt.FileStats()
            pending = None  # a batch is given out once the next one says whether it is the last
            try:
                for block in _read(corpus, cf, unit, stats):
                    numbers, texts, record_langs = block
                    langs = corpus._labels(cf, record_langs, len(texts))
                    run.seen += len(numbers)
                    if not texts:
                        continue
                    kept = DocBatch(texts, langs, [cf.path] * len(texts), list(numbers))
                    ends = Corpus._count(kept, entries[unit.file], run)
                    start = 0
                    while start < len(kept):
                        end = start + 1
                        while (
                            end < min(len(kept), start + size)
                            and ends[end] - ends[start] < max_chars
                        ):
                            end += 1
                        if pending is not None:  # not the unit's last batch
                            yield self._given(pending, k, False)
                        pending = kept.cut(start, end)
                        start = end
            except fmt.BinaryFile as binary:
                run.binary_files.append(
                    {"path": cf.path, "offset": binary.offset, "why": binary.why}
                )
                corpus.warn(
                    f"{cf.path}: a block at byte {unit.start} skipped (binary: {binary.why})"
                )
            if pending is not None:
                yield self._given(pending, k, True)
            if stats.invalid_utf8:
                run.invalid_utf8[cf.path] = run.invalid_utf8.get(cf.path, 0) + stats.invalid_utf8
            run.empty_records += stats.empty_records
        run.complete = len(self.drawn) == len(self)  # not when a closed language was skipped
        if run.documents == 0:
            raise CorpusError(corpus._why_empty(run))

    def _given(self, batch: DocBatch, k: int, last: bool) -> DocBatch:
        self.batch_unit.append(k)
        self.batch_last.append(last)
        return batch


def _whole(corpus: Corpus, cf: CorpusFile) -> bool:
    return bool(cf.compression or corpus.whole_files)


def _count(corpus: Corpus, index: int, cf: CorpusFile) -> int:
    """How many units one file has (see the top)."""
    if _whole(corpus, cf):
        return 1
    if cf.format == "parquet":
        # deferred: pyarrow only where a parquet file is read
        from fertility.corpus.parquet import footer

        return int(footer(cf.path, cf.fs_path or cf.path, cf.size).num_row_groups)
    return -(-cf.size // BLOCK_BYTES)  # ceil: a last, shorter block


def _read(corpus: Corpus, cf: CorpusFile, unit: Unit, stats: fmt.FileStats) -> Iterator[fmt.Block]:
    if _whole(corpus, cf):  # (a unit ending at -1 is a whole file's or a row group)
        with closing(corpus._blocks(cf, stats, quiet=True)) as blocks:
            yield from blocks
        return
    path = cf.fs_path or cf.path
    if cf.format == "parquet":
        yield _row_group(corpus, cf, path, unit.start, stats)
        return
    with remote.open_file(path) as raw:  # a URL: only these bytes are read
        data = _lines_from(raw, unit.start, unit.end, cf.size)
    if cf.format == "txt":
        yield from fmt.read_txt(io.BytesIO(data), cf.path, corpus.strict, stats, corpus.limits)
    else:
        records = fmt.read_jsonl(
            io.BytesIO(data),
            cf.path,
            corpus.text_field,
            corpus.lang_field,
            corpus.strict,
            stats,
            corpus.limits,
        )
        yield from fmt.gather(records)


def _lines_from(raw, start: int, end: int, size: int) -> bytes:
    """The bytes of the lines whose first byte lies in [start, end) of a file of `size`."""
    first = 0 if start == 0 else _after_newline(raw, start - 1, size)
    if first >= end:
        return b""
    last = _after_newline(raw, end - 1, size)
    raw.seek(first)
    return raw.read(last - first)


def _after_newline(raw, at: int, size: int) -> int:
    """The offset just past the first \\n at or after `at` (`size` when there is none)."""
    raw.seek(at)
    pos = at
    while pos < size:
        chunk = raw.read(min(1 << 16, size - pos))
        if not chunk:
            break
        i = chunk.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(chunk)
    return size


def _row_group(
    corpus: Corpus, cf: CorpusFile, path: str, group: int, stats: fmt.FileStats
) -> fmt.Block:
    """Row group `group` of a parquet file as one block, numbered by row in the file."""
    try:
        raw = remote.open_file(path)  # a URL: the footer and this row group are read
    except OSError as e:
        raise CorpusError(f"{cf.path}: cannot open ({e.strerror or e})") from None
    # deferred: pyarrow only where a parquet file is read
    from fertility.corpus.parquet import footer, row_group_block

    with raw:
        meta = footer(cf.path, cf.fs_path or cf.path, cf.size)
        names = (corpus.text_field, corpus.lang_field)
        return row_group_block(raw, meta, cf.path, group, names, corpus.limits, stats)


__all__ = ["BLOCK_BYTES", "BlockOrder", "Unit"]
