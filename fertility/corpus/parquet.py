"""Parquet files, row group by row group: the one reader that needs pyarrow, so the others
(and a measuring process that reads none) never load it (fertility.corpus.reader imports this
module for the first .parquet file; --precision reads its row groups as blocks here too)."""

from __future__ import annotations

import functools
from collections.abc import Generator, Sequence
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fertility.corpus import remote
from fertility.corpus.formats import (
    Block,
    FileStats,
    Limits,
    Record,
    spool,
    spool_limit,
    too_long,
)
from fertility.errors import CorpusError, one_line

PARQUET_BATCH = 1024  # rows per pyarrow batch: memory stays flat on any file size


def check_row_groups(
    parquet: pq.ParquetFile, path: str, columns: Sequence[str], limits: Limits
) -> None:
    """Refuse, from the footer alone, a row group whose column (text, or lang) holds more
    bytes a row than a value within --max-doc-chars can (4 bytes a character, its 4-byte
    length, PAGE_SLACK a row for levels and page headers): one of its values is longer, and
    decoding it would hold it whole (a 400 MB cell, 18 MB on disk, peaked at 1.72 GB)."""
    meta = parquet.metadata
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    first = 1
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        rows = max(group.num_rows, 1)
        for name in columns:
            if name not in names:
                continue
            size = group.column(names.index(name)).total_uncompressed_size
            if size > rows * (4 * limits.max_doc_chars + 4 + PAGE_SLACK) + PAGE_SLACK:
                raise CorpusError(
                    f"{path}: row group {g} (rows {first:,}-{first + group.num_rows - 1:,}) "
                    f"holds {size:,} bytes of column '{name}', so one of its rows is longer "
                    f"than --max-doc-chars ({limits.max_doc_chars} characters); raise it or "
                    "split the document"
                )
        first += group.num_rows


# What a row group's column holds besides its values' bytes and lengths, at most, a row (the
# repetition and definition levels, a page header per row at worst, with statistics of up to
# 4,096 bytes each for min and max) and once (the dictionary page's header): so a footer's
# size proves a long value.
PAGE_SLACK = 16384


def check_lengths(column: pa.Array, path: str, first: int, limits: Limits) -> None:
    """Refuse a value of a decoded parquet text column over --max-doc-chars before it becomes
    a Python string (`to_pylist` held it twice more); `first` is its first row's number."""
    if column.nbytes <= limits.max_doc_chars:  # fewer bytes than the limit has characters
        return
    if pa.types.is_dictionary(column.type):  # the longest of the values that are used
        lengths = pc.take(pc.utf8_length(column.dictionary), column.indices)
    else:
        lengths = pc.utf8_length(column)
    over = pc.greater(lengths, limits.max_doc_chars)
    if pc.any(over).as_py():
        raise too_long(path, f"row {first + pc.index(over, True).as_py()}", limits)


def _columns(parquet: pq.ParquetFile, path: str, fields: tuple[str, str | None]) -> list[str]:
    """The columns to read, (text) or (text, lang), after refusing a file whose text column
    is missing or holds no strings. fields: the (text, lang) names (lang None or absent from
    the file: not read)."""
    text_field, lang_field = fields
    schema = parquet.schema_arrow
    if text_field not in schema.names:
        raise CorpusError(f"{path}: no column '{text_field}' (columns: {', '.join(schema.names)})")
    kind = schema.field(text_field).type
    if pa.types.is_dictionary(kind):  # categorical strings: to_pylist gives the values
        kind = kind.value_type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise CorpusError(f"{path}: column '{text_field}' is {kind}, not a string column")
    return [text_field] + ([lang_field] if lang_field and lang_field in schema.names else [])


def _records(
    table: pa.Table | pa.RecordBatch, first: int, path: str, stats: FileStats, limits: Limits
) -> Generator[Record, None, None]:
    """The documents of decoded rows, numbered from `first`: an empty or blank text is
    counted and skipped, one over --max-doc-chars refused, a label that is no string or
    empty is None."""
    texts = table.column(0).to_pylist()
    langs = table.column(1).to_pylist() if table.num_columns > 1 else [None] * len(texts)
    for number, text, lang in zip(range(first, first + len(texts)), texts, langs):
        if text is None or not text.strip():
            stats.empty_records += 1
            continue
        if len(text) > limits.max_doc_chars:
            raise too_long(path, f"row {number}", limits)
        yield number, text, lang if isinstance(lang, str) and lang else None


def read_parquet(
    stream: BinaryIO,
    compressed_size: int | None,
    path: str,
    text_field: str,
    lang_field: str | None,
    stats: FileStats,
    limits: Limits,
) -> Generator[Record, None, None]:
    """`compressed_size`: the file's size when `stream` decompresses it, else None."""
    if compressed_size is not None:  # parquet needs to seek: spool to disk, not memory
        with spool(stream, path, spool_limit(compressed_size)) as file:
            yield from read_parquet(file, None, path, text_field, lang_field, stats, limits)
        return
    try:
        parquet = pq.ParquetFile(stream)
    except (pa.ArrowException, OSError) as e:
        raise CorpusError(f"{path}: not a readable parquet file ({one_line(e)})") from None
    columns = _columns(parquet, path, (text_field, lang_field))
    check_row_groups(parquet, path, columns, limits)
    number = 0
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH, columns=columns):
            check_lengths(batch.column(0), path, number + 1, limits)
            yield from _records(batch, number + 1, path, stats, limits)
            number += batch.num_rows
    except (pa.ArrowException, OSError, UnicodeDecodeError) as e:
        raise CorpusError(
            f"{path}: corrupt parquet data after row {number} ({one_line(e)})"
        ) from None


def row_group_block(
    raw: BinaryIO,
    meta: pq.FileMetaData,
    path: str,
    group: int,
    fields: tuple[str, str | None],
    limits: Limits,
    stats: FileStats,
) -> Block:
    """Row group `group` of the parquet file open as `raw` (its footer `meta`, read once per
    file by `footer`) as one block of --precision, numbered by row in the file. fields: the
    (text, lang) columns (lang None or absent: none)."""
    try:
        parquet = pq.ParquetFile(raw, metadata=meta)
        columns = _columns(parquet, path, fields)
        check_row_groups(parquet, path, columns, limits)  # before decoding
        table = parquet.read_row_group(group, columns=columns)
        before = sum(parquet.metadata.row_group(g).num_rows for g in range(group))
    except (pa.ArrowException, OSError) as e:
        raise CorpusError(f"{path}: corrupt parquet row group {group} ({one_line(e)})") from None
    rows = list(_records(table, before + 1, path, stats, limits))
    numbers, kept, langs = (list(x) for x in zip(*rows)) if rows else ([], [], [])
    return Block(numbers, kept, langs if len(columns) > 1 else None)


def footer(shown: str, path: str, size: int) -> pq.FileMetaData:
    """A parquet file's metadata (its footer), or exit 2 naming `shown`. A URL's is kept for
    the files read most recently (--precision's blocks are row groups drawn in random order,
    each read on its own: one request fewer each); a local file's is read again, so a file
    rewritten since is seen."""
    try:
        if remote.is_remote(path):
            return _remote_footer(path, size)
        return pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError) as e:
        raise CorpusError(f"{shown}: not a readable parquet file ({one_line(e)})") from None


@functools.lru_cache(maxsize=64)
def _remote_footer(url: str, size: int) -> pq.FileMetaData:
    with remote.open_file(url) as raw:  # the footer's bytes only
        return pq.ParquetFile(raw).metadata
