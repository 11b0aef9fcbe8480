"""The mechanics behind `fertility.corpus`: file names -> (format, compression, language
label), and decompressed bytes -> `Block`s, columns of consecutive records.

corpus.py holds the policy (walking, labelling, sampling, counting); this file only knows
how each format is laid out. Everything streams: .txt and .jsonl are read in blocks of whole
lines (`_line_blocks`, shared), keeping each line's byte offset so invalid UTF-8 can be
counted per file and located. .txt lines go out a block at a time with no object per line
but its text (millions of lines per corpus); .jsonl, .parquet and whole files are read a
record at a time and `gather`ed into blocks.

Decompression (`open_decompressed`) holds a fixed amount of memory whatever the compression
ratio: every read gives out at most about what it asked for, and the readers above ask for a
block at a time and refuse a line over the limit before it is held, so a bomb of one huge
line ends in that refusal and one of many short lines is read as the corpus it is. A
compressed parquet file is spooled to a temporary file of bounded size (`spool`).
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import json
import lzma
import operator
import re
import sys
import tempfile
import zlib
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from itertools import compress, count
from typing import BinaryIO, NamedTuple, cast

try:  # only .zst files need it: pretrain and eval run where it is not installed (#37)
    import zstandard
except ImportError:
    zstandard = None  # type: ignore[assignment]

from fertility.errors import CorpusError
from fertility.options import MAX_DOC_CHARS, MAX_INVALID_SHARE

FORMATS = {".txt": "txt", ".jsonl": "jsonl", ".parquet": "parquet"}
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".xz": "xz", ".bz2": "bzip2"}
BINARY_PROBE = 8192  # a NUL byte in this many leading (decompressed) bytes: a binary file
# MAX_DOC_CHARS (the longest document measured) and MAX_INVALID_SHARE (the share of invalid
# UTF-8 that makes a file binary) are declared with the corpus options: fertility.options.
MIN_SHARE_BYTES = 512  # a shorter head is too small to judge by its share
# Byte order marks of the encodings we do not read; UTF-32 first (its LE mark starts as UTF-16's).
_FOREIGN_BOMS = (
    (b"\xff\xfe\0\0", "UTF-32LE"),
    (b"\0\0\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16BE"),
)


class _NoZstandard(Exception):
    """Never raised: stands for zstandard.ZstdError where zstandard is not installed."""


# What a broken stream raises while we decompress or read it.
ZSTD_ERROR: type[Exception] = zstandard.ZstdError if zstandard is not None else _NoZstandard
STREAM_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, ZSTD_ERROR)

Record = tuple[int, str, "str | None"]  # (1-based line/record number, text, lang from record)


class Block(NamedTuple):
    """Consecutive records of one file as columns: entry i of each is record i's."""

    numbers: Sequence[int]  # 1-based line/record numbers (a range where none was dropped)
    texts: list[str]
    langs: list[str | None] | None  # the language each record names; None: the format has none


GATHER_RECORDS = 1024  # records per block from a per-record reader, at most

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

    def __init__(self, offset: int, why: str | None = None):
        super().__init__(offset)
        self.offset = offset
        self.why = why or f"NUL byte at byte {offset}"


@dataclass
class FileStats:
    """What reading one file noticed besides its documents."""

    invalid_utf8: int = 0  # U+FFFD inserted (one per maximal invalid byte sequence)
    first_bad_offset: int | None = None  # byte offset (0-based, decompressed) of the first
    empty_records: int = 0  # .jsonl/.parquet records whose text is empty or whitespace
    zstd_frames: int = 0  # zstd frames begun
    unchecked_frames: int = 0  # ... of them without a content checksum


@dataclass(frozen=True)
class Limits:
    """What a file may hold and still be read as text (Corpus options of the same names)."""

    max_doc_chars: int = MAX_DOC_CHARS
    max_invalid_utf8: float = MAX_INVALID_SHARE


def too_long(path: str, where: str, limits: Limits) -> CorpusError:
    return CorpusError(
        f"{path}: {where} is longer than --max-doc-chars "
        f"({limits.max_doc_chars} characters); raise it or split the document"
    )


# C0 controls but NUL (checked on its own), tab, \n and \r; and DEL. Text has next to none;
# a file whose head is mostly these is binary (noise, a terminal capture, a corrupt file).
_CONTROLS = bytes([*range(1, 9), 11, 12, *range(14, 32), 127])
_NOT_CONTROLS = bytes(b for b in range(256) if b not in _CONTROLS)
MAX_CONTROL_SHARE = 0.5


def check_head(head: bytes, path: str, limits: Limits) -> int:
    """Bytes to skip at the start (a UTF-8 byte order mark). Raises CorpusError for a UTF-16
    or UTF-32 byte order mark (text we do not decode) and BinaryFile for a NUL byte, a head
    that is mostly control characters (whatever --max-invalid-utf8 says), or a share of
    invalid UTF-8 above the limit."""
    for bom, name in _FOREIGN_BOMS:
        if head.startswith(bom):
            raise CorpusError(
                f"{path}: {name} text (byte order mark); fertility reads UTF-8: "
                f"convert it first, e.g. iconv -f {name[:6]} -t UTF-8"
            )
    if b"\0" in head:
        raise BinaryFile(head.index(b"\0"))
    controls = len(head.translate(None, _NOT_CONTROLS))
    if head and controls > MAX_CONTROL_SHARE * len(head):
        raise BinaryFile(
            0, f"{controls / len(head):.0%} of its first {len(head)} bytes are control characters"
        )
    if len(head) >= MIN_SHARE_BYTES and limits.max_invalid_utf8 < 1:
        text = head.decode("utf-8", "replace")
        bad = text.count("\ufffd") - head.count("\ufffd".encode())
        if bad > limits.max_invalid_utf8 * len(head):
            raise BinaryFile(
                0,
                f"{bad / len(head):.0%} of its first {len(head)} bytes are "
                f"invalid UTF-8, over --max-invalid-utf8 "
                f"{limits.max_invalid_utf8:g}",
            )
    return len(_BOM) if head.startswith(_BOM) else 0


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


def open_decompressed(
    raw: BinaryIO, compression: str | None, path: str = "", stats: FileStats | None = None
) -> BinaryIO:
    """A buffered binary stream of the decompressed content of the open file `raw`, holding
    a fixed amount of memory whatever the compression ratio (see _StreamsReader). `path`
    names the file in errors; `stats` counts its zstd frames without a content checksum."""
    if compression is None:
        return raw
    if compression == "gzip":  # bounded already: it decompresses with a max_length
        # a GzipFile is a buffered binary file; typeshed derives it from BufferedIOBase only
        return cast(BinaryIO, gzip.GzipFile(fileobj=raw, mode="rb"))
    # bz2.BZ2File and lzma.LZMAFile stop without a word at a corrupt second stream or at
    # trailing garbage (documents lost, exit 0); this reader makes every stream count.
    reader = _StreamsReader(raw, compression, path, stats or FileStats())
    return io.BufferedReader(reader, buffer_size=1 << 16)


class UpTo(io.RawIOBase):
    """The first `size` bytes of `raw`: a file that grows while it is read gives the same
    bytes to every reader. One that ends short of `size` shrank: an error, not a short read."""

    def __init__(self, raw: BinaryIO, size: int, path: str):
        self._raw, self._left, self._path = raw, size, path
        self.grew = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left == 0:
            self.grew = bool(self._raw.read(1))
            return 0
        data = self._raw.read(min(len(buffer), self._left))
        if not data:
            raise CorpusError(
                f"{self._path}: shrank while it was read "
                f"({self._left} bytes short of its size when opened)"
            )
        buffer[: len(data)] = data
        self._left -= len(data)
        return len(data)


# Decompression holds a fixed amount of memory whatever the compression ratio (a few KB of
# .bz2 can hold gigabytes): no call gives out more than its reader was asked for, or, for
# zstd, than ZSTD_SLICE compressed bytes can make. Corpus readers ask for a block at a time.
DECOMPRESS_READ = 1 << 16  # compressed bytes read at a time (bzip2, xz)
# zstandard's decompressobj has no max_length: it is given this many compressed bytes at a
# time. A zstd block holds at most 128 KiB and an RLE block takes 4 bytes, so a slice gives
# at most 32 MiB (one of ordinary text: 3-10 KiB).
ZSTD_SLICE = 1 << 10
# What the decompressor itself may hold (the window of past output that later data copies
# from): 128 MiB, libzstd's own default limit (zstd --long, up to --long=27) and twice what
# xz -9 needs (a 64 MiB dictionary). A file that needs more is refused, not read.
MAX_DECOMPRESSOR_MEMORY = 1 << 27
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


# the standard library's decompressors, which take a max_length (zstandard's does not)
_Decompressor = bz2.BZ2Decompressor | lzma.LZMADecompressor
_DECOMPRESSORS = (bz2.BZ2Decompressor, lzma.LZMADecompressor)


class _StreamsReader(io.RawIOBase):
    """Streaming decompression of one or more concatenated bzip2, xz or zstd streams
    (frames): anything after a stream's end must be a whole further stream. zstandard's
    own stream_reader ends silently on a truncated frame, as the standard library's bz2 and
    lzma files do on trailing data: either would pass a cut download off as a short corpus.

    Memory stays bounded: a read gives out at most what it asks for (bz2 and lzma take a
    max_length); zstd, whose decompressobj has none, is fed ZSTD_SLICE bytes at a time and
    what one read does not take waits in `_out`. The decompressors' own memory (xz's
    dictionary, zstd's window) is capped by MAX_DECOMPRESSOR_MEMORY. A zstd frame without a
    content checksum is counted in `stats.unchecked_frames`: corruption inside it cannot be
    detected."""

    def __init__(self, raw: BinaryIO, compression: str, path: str, stats: FileStats):
        self._raw, self._compression, self._path, self._stats = raw, compression, path, stats
        self._zstd = compression == "zstd"
        self._read_size = ZSTD_SLICE if self._zstd else DECOMPRESS_READ
        if self._zstd:
            if zstandard is None:
                raise CorpusError(f"{path}: a .zst file needs zstandard (pip install zstandard)")
            self._dctx = zstandard.ZstdDecompressor(max_window_size=MAX_DECOMPRESSOR_MEMORY)
        # the current stream's decompressor; None before the first
        self._obj: _Decompressor | zstandard.ZstdDecompressionObj | None = None
        self._in = b""  # compressed bytes read but not yet given to a decompressor
        self._out, self._pos = b"", 0  # zstd output not yet given out (from _pos on)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        want = len(buffer)
        if want == 0:
            return 0
        if self._pos == len(self._out):
            self._out, self._pos = self._decompress(want), 0
        n = min(want, len(self._out) - self._pos)
        buffer[:n] = memoryview(self._out)[self._pos : self._pos + n]
        self._pos += n
        if self._pos == len(self._out):  # all given out: do not keep it
            self._out, self._pos = b"", 0
        return n

    def _decompress(self, want: int) -> bytes:
        """At least 1 and up to `want` bytes (zstd: up to a slice's output beyond it);
        b"" only at the end of the last whole stream."""
        parts: list[bytes] = []
        held = 0
        while held < want:
            if self._obj is None or self._obj.eof:  # the start, or a stream ended
                if self._obj is not None:
                    self._in = self._obj.unused_data + self._in
                if not self._start():
                    break
            obj = self._obj
            assert obj is not None, "_start() made the stream's decompressor"
            if self._needs_input() and not self._in:
                self._in = self._raw.read(self._read_size)
                if not self._in:
                    raise EOFError("the last stream is truncated")
            try:
                if isinstance(obj, _DECOMPRESSORS):  # bz2, xz: at most what is wanted
                    out = obj.decompress(self._in, want - held)
                else:  # zstd: at most ZSTD_SLICE bytes: see there
                    out = obj.decompress(self._in)
                self._in = b""  # taken: what a stream does not use is its unused_data
            except (lzma.LZMAError, ZSTD_ERROR) as e:
                if (refused := self._too_big(e)) is not None:
                    raise refused from None
                raise
            if out:
                parts.append(out)
                held += len(out)
        return b"".join(parts)

    def _needs_input(self) -> bool:
        if self._zstd:
            return True
        assert isinstance(self._obj, _DECOMPRESSORS), "bz2 and xz streams have one"
        return self._obj.needs_input

    def _start(self) -> bool:
        """Begin the next stream; False at the clean end of the file (after a whole stream,
        or an empty file)."""
        while len(self._in) < 5:  # the magic number and (zstd) the frame's descriptor
            more = self._raw.read(self._read_size)
            if not more:
                break
            self._in += more
        if not self._in:
            return False
        if self._compression == "bzip2":
            self._obj = bz2.BZ2Decompressor()
        elif self._compression == "xz":
            self._obj = lzma.LZMADecompressor(memlimit=MAX_DECOMPRESSOR_MEMORY)
        else:
            self._obj = self._dctx.decompressobj()
            # a frame's descriptor bit 2 says whether a checksum of its content follows
            if self._in.startswith(_ZSTD_MAGIC) and len(self._in) > 4:
                self._stats.zstd_frames += 1
                if not self._in[4] & 4:
                    self._stats.unchecked_frames += 1
        return True

    def _too_big(self, error: Exception) -> CorpusError | None:
        """The error for a stream whose decompressor would need more memory than allowed."""
        if "Memory usage limit" in str(error):
            what = "its xz dictionary"
        elif "requires too much memory" in str(error):
            what = "its zstd window"
        else:
            return None
        return CorpusError(
            f"{self._path}: {what} needs over {MAX_DECOMPRESSOR_MEMORY >> 20} MiB of memory to "
            "decompress; recompress it with a smaller one"
        )


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


def _line_blocks(
    stream: BinaryIO, path: str, limits: Limits, max_line: int, cr: bool = False
) -> Iterator[tuple[int, bytes]]:
    """(byte offset, block) for consecutive blocks of whole lines, each line with its \\n
    (the file's last line may lack one). Reading whole blocks lets a caller decode and split
    many lines in one call. The head is checked first (check_head). NUL bytes raise
    BinaryFile: one in the first BINARY_PROBE bytes before anything is given out, a later one
    after the lines before the NUL's line. A line over `max_line` bytes raises before it is
    held whole (memory stays bounded); with `cr` a lone \\r ends a line too, so a file of
    \\r-ended lines is cut there instead."""
    head = stream.read(BINARY_PROBE)
    offset = check_head(head, path, limits)
    pending: list[bytes] = []  # read but not given out: the start of an unfinished line
    held = 0  # bytes in pending
    # the head and the next read as one block: a block of a file read in small units
    # (--precision's 16 KB) is then one batch of documents, not two
    block = head[offset:] + (stream.read(READ_BLOCK) if head else b"")
    while True:
        cut = block.rfind(b"\n") + 1 if block else 0  # an empty block: end of file
        if block and cut == 0 and cr:  # not before a final \r: a \n may follow it
            cut = block.rfind(b"\r", 0, len(block) - 1) + 1
        if block and cut == 0:  # one line longer than a block: read on
            pending.append(block)
            held += len(block)
            if held > max_line:
                raise too_long(path, f"the line at byte {offset}", limits)
            block = stream.read(READ_BLOCK)
            continue
        held = len(block) - cut
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


def read_txt(
    stream: BinaryIO, path: str, strict: bool, stats: FileStats, limits: Limits = Limits()
) -> Iterator[Block]:
    """Lines of a .txt file, a block at a time; terminators \\n, \\r\\n and a lone \\r. A
    whitespace-only line is no document but keeps its number. A line over max_doc_chars
    raises once the lines before it are given out, as a line-at-a-time reader would."""
    number = 0
    # a UTF-8 character is at most 4 bytes: a longer line holds more than max_doc_chars
    for offset, raw in _line_blocks(stream, path, limits, 4 * limits.max_doc_chars, cr=True):
        lines = _txt_lines(raw, offset, path, strict, stats)
        first, number = number + 1, number + len(lines)
        # A character takes at least a byte, so only a block of more bytes than the limit
        # can hold a line over it: the lines' lengths are not even looked at otherwise.
        if len(raw) > limits.max_doc_chars and max(map(len, lines)) > limits.max_doc_chars:
            at = next(i for i, line in enumerate(lines) if len(line) > limits.max_doc_chars)
            if (block := _text_lines(lines[:at], first)).texts:
                yield block
            raise too_long(path, f"line {first + at}", limits)
        if (block := _text_lines(lines, first)).texts:
            yield block


def _text_lines(lines: list[str], first: int) -> Block:
    """The lines that are documents (not empty, not only whitespace), numbered from `first`.
    Both tests run over the whole list in C (map, any, compress): no Python step per line."""
    if "" not in lines and not any(map(str.isspace, lines)):  # the usual block: all are text
        return Block(range(first, first + len(lines)), lines, None)
    keep = list(map(operator.and_, map(bool, lines), map(operator.not_, map(str.isspace, lines))))
    return Block(list(compress(count(first), keep)), list(compress(lines, keep)), None)


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


def gather(records: Generator[Record, None, None]) -> Iterator[Block]:
    """A per-record reader's records in blocks of at most GATHER_RECORDS records and
    READ_BLOCK characters. Records read before an error are given out before it is raised,
    as they were one at a time."""
    with closing(records):
        while True:
            numbers: list[int] = []
            texts: list[str] = []
            langs: list[str | None] = []
            most, chars = GATHER_RECORDS, 0
            try:
                for number, text, lang in records:
                    numbers.append(number)
                    texts.append(text)
                    langs.append(lang)
                    chars += len(text)
                    if len(texts) >= most or chars >= READ_BLOCK:
                        break
            except Exception:
                if texts:
                    yield Block(numbers, texts, langs)
                raise
            if not texts:
                return
            yield Block(numbers, texts, langs)


def read_whole(
    stream: BinaryIO, path: str, strict: bool, stats: FileStats, limits: Limits = Limits()
) -> Generator[Record, None, None]:
    # read no more than can hold max_doc_chars (+ a line end): a huge file is refused unread
    data = stream.read(4 * limits.max_doc_chars + 3)
    start = check_head(data[:BINARY_PROBE], path, limits)
    if b"\0" in data:
        raise BinaryFile(data.index(b"\0"))
    end = len(data) - (2 if data.endswith(b"\r\n") else 1 if data.endswith((b"\n", b"\r")) else 0)
    if end - start > 4 * limits.max_doc_chars:
        raise too_long(path, "the file (--whole-files)", limits)
    text = decode(data[start:end], start, path, strict, stats)
    if len(text) > limits.max_doc_chars:
        raise too_long(path, "the file (--whole-files)", limits)
    if text.strip():
        yield 1, text, None


def read_jsonl(
    stream: BinaryIO,
    path: str,
    text_field: str,
    lang_field: str | None,
    strict: bool,
    stats: FileStats,
    limits: Limits = Limits(),
) -> Generator[Record, None, None]:
    # Errors cite the physical line (to find it in an editor); documents carry the record
    # number (blank lines are not records), as the Document contract says.
    record_no = 0
    # A character takes at most 12 bytes in JSON (a surrogate pair of \\u escapes): a longer
    # record cannot fit within max_doc_chars unless other fields fill it; refused either way.
    blocks = _line_blocks(stream, path, limits, 12 * limits.max_doc_chars)
    lines = (line for offset, block in blocks for line in _raw_lines(block, offset))
    for number, (start, raw) in enumerate(lines, 1):
        if not raw.strip():
            continue
        record_no += 1
        line = decode(raw, start, path, strict, stats)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorpusError(f"{path}: line {number}: not valid JSON ({e.msg})") from None
        except RecursionError:
            raise CorpusError(f"{path}: line {number}: JSON nested too deeply to read") from None
        except ValueError:  # Python refuses to convert an integer of over 4300 digits
            raise CorpusError(
                f"{path}: line {number}: JSON number with too many digits "
                f"(over {sys.get_int_max_str_digits()})"
            ) from None
        if not isinstance(record, dict):
            raise CorpusError(f"{path}: line {number}: not a JSON object")
        if text_field not in record:
            raise CorpusError(f"{path}: line {number}: no field '{text_field}'")
        text = record[text_field]
        if not isinstance(text, str):
            kind = type(text).__name__ if text is not None else "null"
            raise CorpusError(
                f"{path}: line {number}: field '{text_field}' is {kind}, not a string"
            )
        if len(text) > limits.max_doc_chars:
            raise too_long(path, f"line {number}", limits)
        if "\\u" in line:  # only an escape can make a lone surrogate
            text = _no_surrogates(text, text_field, path, number, start, strict, stats)
        if not text.strip():
            stats.empty_records += 1
            continue
        lang = record.get(lang_field) if lang_field else None
        if not (isinstance(lang, str) and lang):
            lang = None
        elif "\\u" in line:  # the label is printed, hashed and written as UTF-8 too
            lang = _no_surrogates(lang, lang_field, path, number, start, strict, stats)
        yield record_no, text, lang


def _no_surrogates(
    value: str, field: str | None, path: str, number: int, start: int, strict: bool, stats
) -> str:
    """`value` (a JSON string field) with each lone surrogate (a `\\ud800`-style escape,
    which no UTF-8 text can hold) replaced by U+FFFD and counted as invalid UTF-8; with
    `strict`, the first one raises."""
    if not _SURROGATE.search(value):
        return value
    if strict:
        raise CorpusError(f"{path}: line {number}: lone surrogate escape in '{field}'")
    value, count = _SURROGATE.subn("\ufffd", value)
    stats.invalid_utf8 += count
    if stats.first_bad_offset is None:
        stats.first_bad_offset = start
    return value


# A compressed parquet file is decompressed to a temporary file (parquet needs to seek), of
# at most PARQUET_SPOOL_RATIO times its compressed size (at least PARQUET_SPOOL_MIN): parquet
# compresses its own columns, so gzip or zstd over it gain little (text stored uncompressed:
# 3-5x); a file that decompresses to more is a bomb or is better stored uncompressed.
PARQUET_SPOOL_RATIO = 100
PARQUET_SPOOL_MIN = 64 << 20


def spool_limit(compressed_size: int) -> int:
    """The most bytes a compressed parquet file of `compressed_size` bytes may decompress to."""
    return max(PARQUET_SPOOL_MIN, PARQUET_SPOOL_RATIO * compressed_size)


def spool(stream: BinaryIO, path: str, limit: int) -> BinaryIO:
    """A temporary file holding what `stream` gives, rewound; over `limit` bytes raises. A
    temporary folder that is full (or cannot be written) is named, not taken for damage."""
    folder = tempfile.gettempdir()

    def failed(e: OSError) -> CorpusError:
        what = (
            f"the temporary folder {folder} is full"
            if e.errno in (errno.ENOSPC, errno.EDQUOT)
            else f"cannot write to the temporary folder {folder}"
        )
        return CorpusError(
            f"{path}: {what} ({e.strerror or e}) while decompressing; "
            "set TMPDIR to a folder with room"
        )

    try:
        file = tempfile.TemporaryFile()
    except OSError as e:
        raise failed(e) from None
    try:
        held = 0
        while chunk := stream.read(1 << 20):  # read errors are the stream's: let them go
            held += len(chunk)
            if held > limit:
                raise CorpusError(
                    f"{path}: decompresses to over {limit:,} bytes, more than a compressed "
                    f"parquet file may ({PARQUET_SPOOL_RATIO}x its size, at least "
                    f"{PARQUET_SPOOL_MIN >> 20} MiB); store it uncompressed (parquet "
                    "compresses its own columns)"
                )
            try:
                file.write(chunk)
            except OSError as e:
                raise failed(e) from None
        try:
            file.flush()
        except OSError as e:
            raise failed(e) from None
        file.seek(0)
        return file
    except BaseException:
        file.close()
        raise
