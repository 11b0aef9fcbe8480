"""Corpus: files and folders -> language-labelled documents, streamed.

`documents()` gives them one at a time; `doc_batches()` in batches as columns (`DocBatch`),
which the measuring path reads, with no object built per document. Both are one pass of
the same reader, which does its bookkeeping (sampling, max_docs, summary counts) a block of
records at a time.

What is read
    Arguments are files or folders, mixed freely (the walk is fertility/corpus/walk.py), or
    URLs of any fsspec protocol, `hf://datasets/ORG/NAME/PATH`, `s3://`, `http(s)://`, ...
    (fertility/corpus/remote.py: listed and read in place, with ranged reads).
    Folders are walked recursively in sorted name order, so two runs read the same
    documents in the same order. Formats: `.txt`, `.jsonl`, `.parquet`, each optionally
    compressed `.gz`, `.zst`, `.xz` or `.bz2` (a compressed parquet file is decompressed to
    a temporary file first: it needs to seek).
    Decompression holds a fixed amount of memory whatever the compression ratio (a bomb of
    one huge line meets the line limit below; one of many short lines is read as a corpus);
    an xz dictionary or zstd window over 128 MiB is refused.
    Anything else, hidden entries (`.DS_Store`, `.git/`), non-regular files, symbolic links
    to folders (never followed), broken links and link loops are skipped and listed with a
    reason in `summary()["skipped_files"]`; a warning says so (one per named file, one per
    walked folder). A file reached under two names (a hard link, a symbolic link to a file
    the walk also meets, a folder named twice) is read once, under the first name met: files
    are told apart by device and inode, and a folder is never walked twice.
    This project's own outputs are not text to measure: every folder `fertility` writes into
    holds a manifest (`fertility.outputs.MANIFEST`, `.fertility-manifest.json`) listing what
    it wrote there (a report, a fix/extend output folder, a pretrain run, an export). The
    walk reads the manifest of each folder it walks, the named one included, and skips every
    file and folder listed (reason "written by fertility"). A manifest above a named path is
    not read: naming an output's folder or file itself (`fix-out/heldout`) reads it.

Documents
    `.txt`: each line is one document. Lines end at \\n, \\r\\n or a lone \\r; the terminator
    is not part of the text. A line that is empty or only whitespace (str.isspace) is not a
    document, but it still counts for line numbers, so parallel files stay aligned. Other
    separators (U+2028, form feed, ...) stay inside the text.
    `whole_files=True`: each `.txt` file is one document, its whole content minus one final
    line terminator; whitespace-only files give none. `.jsonl`/`.parquet` stay one document
    per record either way.
    `.jsonl`: one JSON object per line, text in `text_field`; blank lines are skipped. A line
    that is not JSON, not an object, lacks the field or holds a non-string there raises
    CorpusError (malformed input is never dropped silently). `.parquet`: text from the
    `text_field` column, read in row batches. In both, a record whose text is empty or
    whitespace (or null in parquet) is not a document and is counted in `empty_records`.
    Document.line is then the record number (jsonl: blank lines are not records, empty ones
    are); error messages cite the physical line, to find it in an editor.
    A leading UTF-8 byte order mark is an encoding marker and is dropped.

Language labels, first match wins
    1. the file name without extensions, when it reads as a language code: `bn.txt`,
       `bn.jsonl.gz`, `zh-Hans.txt`, `pt_BR.txt`, FLORES-style `ben_Beng.txt` (kept as is);
    2. the record's `lang_field` (jsonl field or parquet column), when set and a non-empty
       string: named by the user, it wins over a folder's name;
    3. the nearest folder between the file and the argument that named it (for a named file:
       its parent folder) whose name is a known language code: `corpus/bn/part-1.txt` -> `bn`;
    4. `und`. With `lang_field` set, a file whose records leave some `und` (the field missing,
       empty or not a string, or a .txt file, which has no fields) gets one warning with the
       count.
    A language code in a file name is 2-3 lowercase letters, optionally `-`/`_` plus a
    Titlecase 4-letter script or an uppercase 2-letter region; a few common names (`dev`,
    `raw`, `new`, `all`, ...) are never taken as languages. A folder's name must also be a
    known code: 2 letters an ISO 639-1 code, 3 letters an ISO 639-3 (or 639-2/B) code, as
    listed in Debian's iso-codes 4.15 (`pq/` is not a language, `bn/`, `ben/`, `ger/` are;
    `xss/` is Assan); with a script or region (FineWeb-2 `ben_Beng/`, `pt_BR/`) the shape
    is enough.

Bad input
    Invalid UTF-8 is replaced by U+FFFD; `summary()["invalid_utf8"][path]` counts the U+FFFD
    inserted (one per maximal invalid byte sequence, as Python's errors="replace" does; a
    lone surrogate escape in JSON counts as one too). With `strict=True` the first one raises
    CorpusError with its byte offset (0-based, in the decompressed content). A file holding a
    NUL byte is binary: checked in its first 8 KB before any document is given out, and on
    every later line; it is skipped (or, for a NUL met later, the rest of it is) with a
    warning and listed in `binary_files` (with `why`). So is a file whose first 8 KB (when it
    has at least 512 bytes) hold more than `max_invalid_utf8` (default 0.25) U+FFFD
    replacements per byte: random bytes give about 0.47, Latin-1 French or German 0.01-0.03;
    1 turns the check off. A .txt or .jsonl file whose first 8 KB are mostly (over half)
    control characters (C0 but NUL, tab, \\n and \\r; DEL) is binary too, with or without that
    option. A UTF-16 or UTF-32 byte order mark raises CorpusError (convert
    the file to UTF-8). A missing path, an unreadable or corrupt file, a corrupt compressed
    stream (in every format a second stream must be whole and nothing may follow the last),
    a missing parquet column, JSON nested too deeply or holding a number of over 4300
    digits, or a corpus with no documents raises CorpusError with one line naming the file.
    A zstd file with frames that carry no content checksum (damage inside them cannot be
    detected) is read with a warning.
    A file name that is not UTF-8 is read; it is shown with its bad bytes as `\\xNN`, and
    with its control and bidirectional characters escaped (`\\n`, `\\u202e`: see `shown`), so
    every message about it stays one line that reads as it is.

Limits
    A document longer than `max_doc_chars` (default 1,000,000) raises CorpusError naming its
    line: measuring costs about 75-115 bytes per character, so this bounds memory. A `.txt` line
    over 4x that many bytes (a `.jsonl` line over 12x) is refused while it is read, before
    it is held whole. Each file is read up to its size when the Corpus was made (`sizes`
    fixes those sizes, so a worker process reads the same bytes as its parent, and skips a
    file its parent did not see): what a writer appends meanwhile is left out, with a
    warning; a file that shrank is an error.
    Uncompressed parquet is read through its footer and is not cut. A compressed parquet
    file may decompress (to the temporary folder) to 100x its size, at least 64 MiB; more is
    refused, and so is a temporary folder that fills up, naming the folder (set TMPDIR).

Sampling (fertility/corpus/stratify.py)
    `sample=f` keeps a document when a hash of (seed, path relative to its argument, line)
    falls below f. `max_docs=N` keeps N of those drawn across every file and language: the
    corpus is read once more first (no text kept), each language gets its share of the N
    within one document, and within it the documents with the smallest hashes. The whole
    corpus is read either way. The subset depends only on the seed and the data, never on
    batch sizes or processes; `summary()["subset"]` says how it was drawn.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import os
import warnings
from bisect import bisect_left
from collections import Counter
from collections.abc import Generator, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from itertools import accumulate, compress
from typing import Any, BinaryIO, TypedDict

from fertility.corpus import formats as fmt
from fertility.corpus import remote, stratify
from fertility.corpus.documents import DocBatch, Document, batched
from fertility.corpus.walk import WRITTEN_BY_FERTILITY, CorpusFile, Walk, shown, skip_counts
from fertility.errors import CorpusError, one_line, visible
from fertility.options import CorpusOptions


class CorpusWarning(UserWarning):
    """Something was skipped or repaired; the summary has the details."""


class _FileEntry(TypedDict):
    """A file of the pass, as summary()["files"] lists it."""

    path: str
    format: str
    compression: str | None
    lang: str | None
    documents: int
    langs: dict[str, int]  # {label: documents}


def file_entry(cf: CorpusFile) -> _FileEntry:
    """A file's entry of summary()["files"], before any of its documents is counted (the
    one shape a pass and a --precision pass both fill)."""
    return {
        "path": cf.path,
        "format": cf.format,
        "compression": cf.compression,
        "lang": cf.lang,
        "documents": 0,
        "langs": {},
    }


@dataclass
class _Pass:
    """Counters of one pass over the corpus: what summary() reports."""

    files: list[_FileEntry] = field(default_factory=list)
    documents: int = 0
    seen: int = 0
    seen_langs: Counter = field(default_factory=Counter)  # documents met per label
    chars: int = 0
    bytes: int = 0
    binary_files: list[dict] = field(default_factory=list)
    invalid_utf8: dict[str, int] = field(default_factory=dict)
    empty_records: int = 0
    complete: bool = False


def warn(message: str) -> None:
    warnings.warn(message, CorpusWarning, stacklevel=3)


class Corpus:
    def __init__(
        self,
        paths: Iterable[str | os.PathLike] | str | os.PathLike,
        options: CorpusOptions | None = None,
        *,
        sizes: dict[str, int] | None = None,
        **keywords: Any,
    ):
        """`options` (a CorpusOptions: its fields and defaults are the options), any of its
        fields as keywords over it (`Corpus(paths, strict=True)`), and `sizes` (see Limits)."""
        if options is not None and not isinstance(options, CorpusOptions):
            raise TypeError(f"Corpus options: a CorpusOptions, not {type(options).__name__}")
        self.options = opts = dataclasses.replace(options or CorpusOptions(), **keywords)
        text_field, lang_field, whole_files = opts.text_field, opts.lang_field, opts.whole_files
        sample, max_docs, seed, strict = opts.sample, opts.max_docs, opts.seed, opts.strict
        max_doc_chars, max_invalid_utf8 = opts.max_doc_chars, opts.max_invalid_utf8
        on_warning = opts.on_warning
        if sample is not None and (isinstance(sample, bool) or not 0 < sample <= 1):
            raise CorpusError(f"sample={sample!r}: must be a fraction in (0, 1]")
        if max_docs is not None and (
            isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1
        ):
            raise CorpusError(f"max_docs={max_docs!r}: must be a whole number >= 1")
        if (
            isinstance(max_doc_chars, bool)
            or not isinstance(max_doc_chars, int)
            or max_doc_chars < 1
        ):
            raise CorpusError(f"max_doc_chars={max_doc_chars!r}: must be a whole number >= 1")
        if not 0 <= max_invalid_utf8 <= 1:
            raise CorpusError(f"max_invalid_utf8={max_invalid_utf8!r}: must be in [0, 1]")
        self.limits = fmt.Limits(max_doc_chars, max_invalid_utf8)
        self._sizes = sizes  # path -> size fixed by whoever opened the corpus first
        if isinstance(paths, (str, os.PathLike)):  # one path, not an iterable of characters
            paths = [paths]
        self.paths = [os.fspath(p) for p in paths]
        self.text_field, self.lang_field = text_field, lang_field
        self.whole_files, self.strict = whole_files, strict
        self.sample, self.max_docs, self.seed = sample, max_docs, seed
        self.warn = on_warning or warn
        self._threshold = None if sample is None else int(sample * 2**64)
        self._selection: stratify.Selection | None = None  # max_docs's draw, made once

        walk = Walk(sizes, self.warn)  # fertility/corpus/walk.py: what is read, and why not
        for path in self.paths:
            walk.resolve(path)
        self.files: list[CorpusFile] = walk.files
        self._skipped: list[dict] = walk.skipped
        if not self.files:
            ours = any(s["reason"] == WRITTEN_BY_FERTILITY for s in self._skipped)
            raise CorpusError(
                f"{', '.join(map(shown, self.paths)) or '(no paths)'}: no corpus files "
                f"({skip_counts(self._skipped) or 'nothing found'})"
                + ("; an output of fertility is read only when named itself" if ours else "")
            )
        self._pass = _Pass()

    def documents(self) -> Iterator[Document]:
        """Documents in file order. Each call is a fresh pass; summary() describes the last."""
        for block, _ in self._kept_blocks():
            yield from block.documents()

    def doc_batches(self, size: int, max_chars: int) -> Iterator[DocBatch]:
        """documents() in batches as columns, each of `size` documents or cut early at the
        document that brings it to `max_chars` characters (the last may be shorter). A fresh
        pass, counted in summary() as documents() counts it."""
        if size < 1:
            raise CorpusError(f"batch size {size}: must be >= 1")
        parts: list[DocBatch] = []  # the batch being filled: slices of blocks
        docs = chars = 0  # ... its documents and characters
        for block, ends in self._kept_blocks():
            start, n = 0, len(block)
            while start < n:
                # The batch ends at the first document that fills it with `size` documents
                # or with `max_chars` characters: ends[j] - ends[start] are the characters
                # of documents start to j (exclusive), so bisect finds the second.
                end = min(
                    start + size - docs,
                    bisect_left(ends, ends[start] + max_chars - chars, start + 1),
                )
                parts.append(block.cut(start, end))
                if end > n:  # not filled in this block: the next one goes on with it
                    docs, chars = docs + n - start, chars + ends[n] - ends[start]
                    break
                yield DocBatch.joined(parts)
                parts, docs, chars, start = [], 0, 0, end
        if parts:
            yield DocBatch.joined(parts)

    def batches(self, size: int = 512) -> Iterator[list[Document]]:
        if size < 1:
            raise CorpusError(f"batch size {size}: must be >= 1")
        return batched(self.documents(), size)

    def _kept_blocks(self) -> Iterator[tuple[DocBatch, list[int]]]:
        """The pass behind documents() and doc_batches(): for each block the readers give,
        the documents kept (sampling, max_docs) and their running character counts (ends[i]:
        the characters of the documents before i; ends[-1]: all of them). summary()'s
        counts are kept here, a block at a time."""
        if self.max_docs is not None and self._selection is None:
            self._selection = stratify.draw(
                self._key_blocks, self.max_docs, self.seed, self._threshold
            )
        run = self._pass = _Pass()
        for file_index, cf in enumerate(self.files):
            entry = file_entry(cf)
            run.files.append(entry)
            stats = fmt.FileStats()
            unlabelled = 0  # documents labelled und for want of a lang_field value
            with closing(self._blocks(cf, stats)) as blocks:
                try:
                    for block in blocks:
                        kept, missing = self._take(file_index, cf, block, run)
                        unlabelled += missing
                        if len(kept):
                            yield kept, self._count(kept, entry, run)
                except fmt.BinaryFile as binary:
                    self._binary(cf, binary, entry, run)
            if stats.invalid_utf8:
                run.invalid_utf8[cf.path] = stats.invalid_utf8
                self.warn(
                    f"{cf.path}: {stats.invalid_utf8} invalid UTF-8 sequence(s) replaced "
                    f"with U+FFFD (first at byte {stats.first_bad_offset})"
                )
            if stats.unchecked_frames:
                self.warn(
                    f"{cf.path}: {stats.unchecked_frames} of {stats.zstd_frames} zstd "
                    "frame(s) without a content checksum: damage inside them cannot be "
                    "detected (the zstd command writes one; Python zstandard needs "
                    "write_checksum=True)"
                )
            if unlabelled and self.lang_field:
                self._unlabelled(cf, unlabelled, entry["documents"])
            run.empty_records += stats.empty_records
        run.complete = True
        if run.documents == 0:
            raise CorpusError(self._why_empty(run))

    def _take(
        self, file_index: int, cf: CorpusFile, block: fmt.Block, run: _Pass
    ) -> tuple[DocBatch, int]:
        """The documents of `block` that sampling and max_docs keep, and how many of them
        are `und` because neither a name nor their record gives a language."""
        numbers, texts, record_langs = block
        langs = self._labels(cf, record_langs, len(texts))
        run.seen += len(numbers)
        stratify.tally(run.seen_langs, langs)
        keep = None
        if self._selection is not None and self._selection.chosen is not None:
            chosen, base = self._selection.chosen, stratify.place(file_index, 0)
            keep = [(base | n) in chosen for n in numbers]
        elif self._threshold is not None:
            threshold = self._threshold
            keep = [k < threshold for k in stratify.keys(self.seed, cf.rel, numbers)]
        if keep is not None and not all(keep):
            numbers, texts = list(compress(numbers, keep)), list(compress(texts, keep))
            langs = list(compress(langs, keep))
            record_langs = None if record_langs is None else list(compress(record_langs, keep))
        # kept documents labelled und for want of a lang_field value (see _unlabelled)
        missing = (
            0 if cf.lang else (len(texts) if record_langs is None else record_langs.count(None))
        )
        return DocBatch(texts, langs, [cf.path] * len(texts), list(numbers)), missing

    def _labels(self, cf: CorpusFile, record_langs: list | None, n: int) -> list[str]:
        """The labels of a block's n documents: a file's name wins; then a record's
        lang_field; then a folder's name (see the top)."""
        if cf.lang and (record_langs is None or not (cf.folder_lang and self.lang_field)):
            return [cf.lang] * n
        if record_langs is None:  # .txt lines: no record to name a language
            return ["und"] * n
        fallback = cf.lang or "und"
        return [lang or fallback for lang in record_langs]

    def _key_blocks(self) -> Iterator[stratify.KeyBlock]:
        """The key pass of max_docs: every document's file, number and label, read as the
        measuring pass reads them (so numbered alike) but with no warning (that pass gives
        them) and no text kept."""
        for file_index, cf in enumerate(self.files):
            with closing(self._blocks(cf, fmt.FileStats(), quiet=True)) as blocks:
                try:
                    for numbers, texts, record_langs in blocks:
                        langs = self._labels(cf, record_langs, len(texts))
                        yield file_index, cf.rel, numbers, langs
                except fmt.BinaryFile:  # the measuring pass says so; stop where it stops
                    pass

    def _unlabelled(self, cf: CorpusFile, missing: int, documents: int) -> None:
        """The one warning for a file whose documents lang_field left `und`."""
        field_ = visible(self.lang_field or "")
        if cf.format == "txt":
            self.warn(
                f'{cf.path}: a .txt file has no "{field_}" field; its {documents:,} '
                "document(s) are labelled und (name the file or its folder by language, "
                "e.g. bn.txt or bn/)"
            )
        else:
            self.warn(
                f'{cf.path}: {missing:,} of {documents:,} records have no "{field_}" field '
                "(or an empty or non-string one); labelled und"
            )

    @staticmethod
    def _count(kept: DocBatch, entry: _FileEntry, run: _Pass) -> list[int]:
        """Count the kept documents into the pass and the file's entry; their running
        character counts (see _kept_blocks)."""
        ends = list(accumulate(map(len, kept.texts), initial=0))
        run.documents += len(kept)
        run.chars += ends[-1]
        run.bytes += len("".join(kept.texts).encode("utf-8"))
        entry["documents"] += len(kept)
        first = kept.langs[0]
        if kept.langs.count(first) == len(kept):  # one label (every .txt block): no Counter
            counts = {first: len(kept)}
        else:
            counts = Counter(kept.langs)  # in first-seen order, as counted one at a time
        langs = entry["langs"]
        for lang, n in counts.items():
            langs[lang] = langs.get(lang, 0) + n
        return ends

    def again(self) -> Corpus:
        """This corpus for one more pass that says nothing (this one's pass said it): the same
        files, not walked again, each read up to the same size; its own summary()."""
        twin = copy.copy(self)
        twin.warn = lambda message: None
        twin._pass = _Pass()
        return twin

    def file_keys(self) -> dict[str, str]:
        """{document source: the file's path relative to the argument that named it}: what
        the held-out split hashes (fertility.shards.parts.heldout_mask), so it is the same
        whether the corpus is named `data`, `./data`, an absolute path, a moved copy or a URL
        of the same tree."""
        return {cf.path: cf.rel for cf in self.files}

    def sizes(self) -> dict[str, int]:
        """{path to open: bytes read of it}: hand to another Corpus (a worker process) so it
        reads exactly the same bytes of a file that grows meanwhile."""
        return {cf.fs_path or cf.path: cf.size for cf in self.files}

    def _blocks(
        self, cf: CorpusFile, stats: fmt.FileStats, quiet: bool = False
    ) -> Generator[fmt.Block, None, None]:
        """The blocks of one file (`quiet`: without the warning of a file that grew)."""
        try:
            raw = remote.open_file(cf.fs_path or cf.path)  # a URL: ranged reads
        except OSError as e:
            raise CorpusError(f"{cf.path}: cannot open ({e.strerror or e})") from None
        with raw:
            # Parquet is read through its footer, which an append cannot move; the others
            # stop at the size the file had when the corpus was opened.
            upto = (
                None
                if cf.format == "parquet" and not cf.compression
                else fmt.UpTo(raw, cf.size, cf.path)
            )
            limits = self.limits
            try:
                stream = fmt.open_decompressed(
                    raw if upto is None else io.BufferedReader(upto, 1 << 16),
                    cf.compression,
                    cf.path,
                    stats,
                )
                if cf.format == "txt" and not self.whole_files:
                    yield from fmt.read_txt(stream, cf.path, self.strict, stats, limits)
                else:
                    yield from fmt.gather(self._records(cf, stream, stats))
            except fmt.STREAM_ERRORS as e:
                what = (
                    f"corrupt or truncated {cf.compression} data"
                    if cf.compression
                    else "read error"
                )
                raise CorpusError(f"{cf.path}: {what} ({one_line(e)})") from None
            if upto is not None and upto.grew and not quiet:
                self.warn(
                    f"{cf.path}: grew while it was read; read its first {cf.size} "
                    "bytes (its size when the corpus was opened)"
                )

    def _records(
        self, cf: CorpusFile, stream: BinaryIO, stats: fmt.FileStats
    ) -> Generator[fmt.Record, None, None]:
        """The per-record readers: .parquet, .jsonl, whole .txt files."""
        if cf.format == "parquet":
            # deferred: pyarrow only where a parquet file is read
            from fertility.corpus.parquet import read_parquet

            return read_parquet(
                stream,
                cf.size if cf.compression else None,
                cf.path,
                self.text_field,
                self.lang_field,
                stats,
                self.limits,
            )
        if cf.format == "jsonl":
            return fmt.read_jsonl(
                stream,
                cf.path,
                self.text_field,
                self.lang_field,
                self.strict,
                stats,
                self.limits,
            )
        return fmt.read_whole(stream, cf.path, self.strict, stats, self.limits)

    def _binary(
        self, cf: CorpusFile, binary: fmt.BinaryFile, entry: _FileEntry, run: _Pass
    ) -> None:
        run.binary_files.append({"path": cf.path, "offset": binary.offset, "why": binary.why})
        if entry["documents"] == 0:
            run.files.remove(entry)
            self.warn(f"{cf.path}: skipped (binary: {binary.why})")
        else:
            self.warn(
                f"{cf.path}: {binary.why}; kept the {entry['documents']} "
                "document(s) before it, skipped the rest as binary"
            )

    def _why_empty(self, run: _Pass) -> str:
        where = ", ".join(map(shown, self.paths))
        if run.seen:
            return f"{where}: sample={self.sample} kept none of the {run.seen} documents"
        details = [
            f"{len(run.files)} file(s) read",
            f"{len(self._skipped)} skipped",
            f"{len(run.binary_files)} binary",
            f"{run.empty_records} empty record(s)",
        ]
        return f"{where}: no documents ({', '.join(details)})"

    # -- reporting --------------------------------------------------------------------

    def summary(self) -> dict:
        """The JSON `corpus` object; complete after a full pass (`complete` says so).

        `files` lists the files opened in the last pass with their `documents`, `lang` (label
        from the name or a folder, or null) and `langs` ({label: documents}). `documents_seen`
        counts documents met before sampling, `documents` those given out. `subset` says how
        they were chosen (`_subset`). `stopped_early` is true when max_docs left documents
        out; `stopped_at` is null (kept for readers of older reports: max_docs once stopped
        reading at a place, now it draws across the corpus).
        """
        run = self._pass
        sel = self._selection
        return copy.deepcopy(
            {
                "paths": [shown(p) for p in self.paths],
                "files": run.files,
                "documents": run.documents,
                "documents_seen": run.seen,
                "chars": run.chars,
                "bytes": run.bytes,
                "skipped_files": self._skipped,
                "binary_files": run.binary_files,
                "invalid_utf8": run.invalid_utf8,
                "empty_records": run.empty_records,
                "sample": self.sample,
                "max_docs": self.max_docs,
                "seed": self.seed,
                "stopped_early": sel is not None and sel.chosen is not None,
                "stopped_at": None,
                "subset": self._subset(run),
                "text_field": self.text_field,
                "lang_field": self.lang_field,
                "whole_files": self.whole_files,
                "strict": self.strict,
                "max_doc_chars": self.limits.max_doc_chars,
                "max_invalid_utf8": self.limits.max_invalid_utf8,
                "complete": run.complete,
            }
        )

    def _subset(self, run: _Pass) -> dict:
        """How the documents given out were chosen: `method` ("all", "sample": --sample's
        hash alone, "stratified": max_docs's draw), one sentence saying it (`statement`,
        for a report to print) and per language the documents met (`seen`), kept by
        --sample (`sampled`), given out (`kept`) and, when stratified, its exact share of
        max_docs (`target`: kept is within one document of it); `key_passes`: the reads of
        the corpus max_docs's draw took before the one that gives the documents out."""
        sel = self._selection
        kept: Counter = Counter()
        for entry in run.files:
            kept.update(entry["langs"])
        seen = sel.seen if sel is not None else run.seen_langs
        sampled = sel.sampled if sel is not None else kept
        wanted = self.max_docs if sel is not None and sel.chosen is not None else None
        stratified = wanted is not None
        n_seen, n_sampled = sum(seen.values()), sum(sampled.values())
        languages = {
            g: {
                "seen": seen[g],
                "sampled": sampled[g],
                "kept": kept[g],
                "target": None if wanted is None else wanted * sampled[g] / n_sampled,
            }
            for g in seen
        }
        hashed = "the documents whose hash of (seed, file, line)"
        if stratified:
            method = "stratified"
            among = (
                f"{n_sampled:,} documents sample={self.sample} keeps of {n_seen:,}"
                if self.sample is not None
                else f"{n_seen:,} documents"
            )
            drawn = [g for g in languages if sampled[g]]
            none = sum(1 for g in drawn if not kept[g])
            statement = (
                f"max_docs={self.max_docs} (seed {self.seed}): a stratified sample of "
                f"{run.documents:,} of the {among}, drawn across every file: each of the "
                f"{len(drawn)} languages gets its share within one document"
                + (f" ({none} got none: their share is under one)" if none else "")
                + f", and within a language {hashed} is smallest"
            )
        elif self.sample is not None:
            method = "sample"
            statement = (
                f"sample={self.sample} (seed {self.seed}): {hashed} falls in the "
                f"lowest {self.sample} of its range, in every file: {run.documents:,} of "
                f"{n_seen:,}"
            )
        else:
            method = "all"
            statement = f"all {run.documents:,} documents"
        if self.max_docs is not None and not stratified:
            statement += f" (max_docs={self.max_docs} is not below them)"
        passes = 0 if sel is None else sel.passes
        return {
            "method": method,
            "statement": statement,
            "key_passes": passes,
            "languages": languages,
        }
