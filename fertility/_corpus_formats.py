"""The mechanics behind `fertility.corpus`: file names -> (format, compression, language
label), and decompressed bytes -> records `(number, text, record_lang)`.

corpus.py holds the policy (walking, labelling, sampling, counting); this file only knows
how each format is laid out. Everything streams: .txt and .jsonl are read in blocks of whole
lines (`_line_blocks`, shared), keeping each line's byte offset so invalid UTF-8 can be
counted per file and located.
"""
from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import re
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from fertility.errors import CorpusError, one_line

FORMATS = {".txt": "txt", ".jsonl": "jsonl", ".parquet": "parquet"}
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".xz": "xz", ".bz2": "bzip2"}
BINARY_PROBE = 8192  # a NUL byte in this many leading (decompressed) bytes: a binary file
PARQUET_BATCH = 1024  # rows per pyarrow batch: memory stays flat on any file size

# What a broken stream raises while we decompress or read it.
STREAM_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, zstandard.ZstdError)

Record = tuple[int, str, "str | None"]  # (1-based line/record number, text, lang from record)

# A language label is conservative on purpose: 2-3 lowercase letters (ISO 639-1/3), optionally
# a script subtag in Titlecase (`zh-Hans`, FLORES `ben_Beng`) or a region in capitals (`pt_BR`).
_LANG_RE = re.compile(r"[a-z]{2,3}(?:[-_](?:[A-Z][a-z]{3}|[A-Z]{2}))?")
# Short lowercase names that are far more often folder/file names than language codes, even
# where ISO 639-3 happens to assign them (e.g. `new` is Newari, `raw` is Rawang).
_NOT_LANGS = frozenset(
    "all bin dat dev doc out raw src tmp tok new old val lib etc log img res run txt csv tsv "
    "gz xz zst bz bz2 tar zip web ids cc".split()
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_BOM = b"\xef\xbb\xbf"


class BinaryFile(Exception):
    """A NUL byte was met at `offset` (decompressed bytes): the file is not text."""

    def __init__(self, offset: int):
        super().__init__(offset)
        self.offset = offset


@dataclass
class FileStats:
    """What reading one file noticed besides its documents."""

    invalid_utf8: int = 0  # U+FFFD inserted (one per maximal invalid byte sequence)
    first_bad_offset: int | None = None  # byte offset (0-based, decompressed) of the first
    empty_records: int = 0  # .jsonl/.parquet records whose text is empty or whitespace


def split_name(name: str) -> tuple[str, str | None, str | None]:
    """`bn.jsonl.gz` -> ("bn", "jsonl", "gzip"); format None when unsupported.
    Extensions match case-insensitively; the stem keeps its case."""
    stem, compression = name, None
    for ext, kind in COMPRESSIONS.items():
        if stem.lower().endswith(ext):
            stem, compression = stem[: -len(ext)], kind
            break
    for ext, kind in FORMATS.items():
        if stem.lower().endswith(ext) and len(stem) > len(ext):
            return stem[: -len(ext)], kind, compression
    return stem, None, compression


def lang_label(name: str) -> str | None:
    """`name` itself when it reads as a language code, else None (`part-1`, `data`, `dev`)."""
    if _LANG_RE.fullmatch(name) and name not in _NOT_LANGS:
        return name
    return None


def open_decompressed(raw: BinaryIO, compression: str | None) -> BinaryIO:
    """A buffered binary stream of the decompressed content of the open file `raw`."""
    if compression is None:
        return raw
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "bzip2":
        return bz2.BZ2File(raw, mode="rb")
    if compression == "xz":
        return lzma.LZMAFile(raw, mode="rb")
    return io.BufferedReader(_ZstdReader(raw), buffer_size=1 << 16)


class _ZstdReader(io.RawIOBase):
    """Streaming zstd (several frames allowed). zstandard's own stream_reader ends silently
    on a truncated frame, which would pass a cut download off as a short corpus."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._fed = False  # input was given to the current frame
        self._out, self._pos = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._pos == len(self._out):
            chunk = self._raw.read(1 << 16)
            if not chunk:
                if self._fed and not self._obj.eof:
                    raise zstandard.ZstdError("truncated zstd frame")
                return 0
            self._out, self._pos = self._decompress(chunk), 0
        n = min(len(buffer), len(self._out) - self._pos)
        buffer[:n] = self._out[self._pos : self._pos + n]
        self._pos += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        parts = []
        while data:
            if self._obj.eof:  # the previous frame ended: the rest starts a new one
                self._obj = self._dctx.decompressobj()
            parts.append(self._obj.decompress(data))
            self._fed = True
            data = self._obj.unused_data if self._obj.eof else b""
        return b"".join(parts)


def decode(raw: bytes, offset: int, path: str, strict: bool, stats: FileStats) -> str:
    """UTF-8 text of `raw` (found at byte `offset`); invalid bytes become U+FFFD and are
    counted, or raise in strict mode."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if strict:
            raise CorpusError(f"{path}: invalid UTF-8 at byte {offset + e.start}") from None
        text = raw.decode("utf-8", "replace")
        # A U+FFFD that was validly encoded in the file is text, not a repair.
        stats.invalid_utf8 += text.count("\ufffd") - raw.count("\ufffd".encode())
        if stats.first_bad_offset is None:
            stats.first_bad_offset = offset + e.start
        return text


READ_BLOCK = 1 << 18  # bytes read at a time (memory stays a few times this, any file size)


def _line_blocks(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(byte offset, block) for consecutive blocks of whole lines, each line with its \\n
    (the file's last line may lack one). Reading whole blocks lets a caller decode and split
    many lines in one call. A leading UTF-8 byte order mark is dropped. NUL bytes raise
    BinaryFile: one in the first BINARY_PROBE bytes before anything is given out, a later one
    after the lines before the NUL's line."""
    head = stream.read(BINARY_PROBE)
    if b"\0" in head:
        raise BinaryFile(head.index(b"\0"))
    offset = len(_BOM) if head.startswith(_BOM) else 0
    pending: list[bytes] = []  # read but not given out: the start of an unfinished line
    block = head[offset:]
    while True:
        cut = block.rfind(b"\n") + 1 if block else 0  # an empty block: end of file
        if block and cut == 0:  # one line longer than a block: read on
            pending.append(block)
            block = stream.read(READ_BLOCK)
            continue
        chunk = b"".join([*pending, block[:cut]])
        pending = [block[cut:]]
        nul = chunk.find(b"\0")
        if nul >= 0:
            if kept := chunk[: chunk.rfind(b"\n", 0, nul) + 1]:
                yield offset, kept
            raise BinaryFile(offset + nul)
        if chunk:
            yield offset, chunk
        if not block:
            return
        offset += len(chunk)
        block = stream.read(READ_BLOCK)


def _raw_lines(block: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    """(byte offset, line without its \\n) for each line of a block from _line_blocks."""
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    for raw in lines:
        yield offset, raw
        offset += len(raw) + 1


def read_txt(stream: BinaryIO, path: str, strict: bool, stats: FileStats) -> Iterator[Record]:
    """Lines of a .txt file; terminators \\n, \\r\\n and a lone \\r. A whitespace-only line is
    no document but keeps its number."""
    number = 0
    for offset, block in _line_blocks(stream):
        lines = _txt_lines(block, offset, path, strict, stats)
        for number, text in enumerate(lines, number + 1):
            if text and not text.isspace():
                yield number, text, None


def _txt_lines(block: bytes, offset: int, path: str, strict: bool, stats: FileStats) -> list[str]:
    """Every line of a block. Valid UTF-8 (the common case) is decoded and split in one go;
    a block with invalid UTF-8 is decoded line by line so each bad sequence is counted and
    located."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        lines = []
        for start, raw in _raw_lines(block, offset):
            for part in raw.removesuffix(b"\r").split(b"\r"):
                lines.append(decode(part, start, path, strict, stats))
                start += len(part) + 1
        return lines
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if "\r" not in text:
        return lines
    return [part for line in lines for part in line.removesuffix("\r").split("\r")]


def read_whole(stream: BinaryIO, path: str, strict: bool, stats: FileStats) -> Iterator[Record]:
    data = stream.read()
    if b"\0" in data:
        raise BinaryFile(data.index(b"\0"))
    start = len(_BOM) if data.startswith(_BOM) else 0
    end = len(data) - (2 if data.endswith(b"\r\n") else 1 if data.endswith((b"\n", b"\r")) else 0)
    text = decode(data[start:end], start, path, strict, stats)
    if text.strip():
        yield 1, text, None


def read_jsonl(
    stream: BinaryIO, path: str, text_field: str, lang_field: str | None, strict: bool,
    stats: FileStats,
) -> Iterator[Record]:
    # Errors cite the physical line (to find it in an editor); documents carry the record
    # number (blank lines are not records), as the Document contract says.
    record_no = 0
    lines = (line for offset, block in _line_blocks(stream) for line in _raw_lines(block, offset))
    for number, (start, raw) in enumerate(lines, 1):
        if not raw.strip():
            continue
        record_no += 1
        line = decode(raw, start, path, strict, stats)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorpusError(f"{path}: line {number}: not valid JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise CorpusError(f"{path}: line {number}: not a JSON object")
        if text_field not in record:
            raise CorpusError(f"{path}: line {number}: no field '{text_field}'")
        text = record[text_field]
        if not isinstance(text, str):
            kind = type(text).__name__ if text is not None else "null"
            raise CorpusError(
                f"{path}: line {number}: field '{text_field}' is {kind}, not a string")
        # A \ud800-style escape decodes to a lone surrogate, which no UTF-8 text can hold.
        if "\\u" in line and _SURROGATE.search(text):
            if strict:
                raise CorpusError(f"{path}: line {number}: lone surrogate escape in '{text_field}'")
            text, count = _SURROGATE.subn("\ufffd", text)
            stats.invalid_utf8 += count
            if stats.first_bad_offset is None:
                stats.first_bad_offset = start
        if not text.strip():
            stats.empty_records += 1
            continue
        lang = record.get(lang_field) if lang_field else None
        yield record_no, text, lang if isinstance(lang, str) and lang else None


def read_parquet(
    stream: BinaryIO, compressed: bool, path: str, text_field: str, lang_field: str | None,
    stats: FileStats,
) -> Iterator[Record]:
    if compressed:  # parquet needs to seek: spill the decompressed bytes to disk, not memory
        with tempfile.TemporaryFile() as spool:
            shutil.copyfileobj(stream, spool, 1 << 20)
            spool.seek(0)
            yield from read_parquet(spool, False, path, text_field, lang_field, stats)
        return
    try:
        parquet = pq.ParquetFile(stream)
        schema = parquet.schema_arrow
    except (pa.ArrowException, OSError) as e:
        raise CorpusError(f"{path}: not a readable parquet file ({one_line(e)})") from None
    if text_field not in schema.names:
        raise CorpusError(f"{path}: no column '{text_field}' (columns: {', '.join(schema.names)})")
    kind = schema.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise CorpusError(f"{path}: column '{text_field}' is {kind}, not a string column")
    columns = [text_field] + ([lang_field] if lang_field and lang_field in schema.names else [])
    number = 0
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH, columns=columns):
            texts = batch.column(0).to_pylist()
            langs = batch.column(1).to_pylist() if len(columns) > 1 else [None] * len(texts)
            for text, lang in zip(texts, langs):
                number += 1
                if text is None or not text.strip():
                    stats.empty_records += 1
                    continue
                yield number, text, lang if isinstance(lang, str) and lang else None
    except (pa.ArrowException, OSError, UnicodeDecodeError) as e:
        raise CorpusError(
            f"{path}: corrupt parquet data after row {number} ({one_line(e)})") from None


