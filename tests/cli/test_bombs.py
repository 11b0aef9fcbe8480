"""`fertility report` on decompression bombs: a few KB of .bz2, .xz or .zst that decompress
to hundreds of MB. Memory stays within a fixed budget whatever the ratio: a bomb of one huge
line ends in the one-line --max-doc-chars refusal, one of many short lines is read as the
(large) corpus it is, a compressed parquet file is spooled to a bounded temporary file, and
a full temporary folder is named. docs/RELIABILITY.md ("Corpus input") lists the promises.

The bombs are built here at test time from a few repeated small streams (every stream of a
file is read, as one content), so building one takes well under a second and no test holds
a bomb's decompressed size in memory (the parquet one writes its 64 MiB spool limit to
disk). The peak memory of a `fertility report` child is measured where the promise is
about memory; the other faults are checked in process."""

import bz2
import errno
import gzip
import json
import lzma
import os
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest
import zstandard

from fertility.corpus import formats as fmt

REPO = Path(__file__).resolve().parents[2]
MB = 1 << 20

# The peak resident memory of the `fertility report` process. Reading a small corpus it peaks
# at about 140 MB here (Python, pyarrow, the tokenizers); a decompressor may hold up to 128 MiB
# of its own (fmt.MAX_DECOMPRESSOR_MEMORY; these bombs' windows are 8 MiB or less), and the
# readers a few blocks and one line of at most 4x --max-doc-chars bytes (4 MB). So 400 MB is
# far above what a bounded reader needs (measured: 80-145 MB), and far below what a reader
# that holds the decompressed content needs: every bomb here decompresses to 192 MB or more
# and an unbounded reader holds it about twice over (measured: 520 MB to 2.2 GB).
PEAK_MB = 400

# Run the command in a fresh child of a fresh interpreter: RUSAGE_CHILDREN is then the peak of
# that one command, not of whatever else this test process ran before.
_MEASURE = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="peak memory through the resource module"
)


def report_peak(tmp_path, path, *args):
    """(exit code, stderr lines, peak MB) of `fertility report <path> -q --workers 1` as a
    separate process."""
    peak = tmp_path / "peak"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, peak, sys.executable, "-m", "fertility.cli"]
        + ["report", path, "-q", "--workers", "1", "-o", tmp_path / "r.json", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    maxrss = int(peak.read_text())  # KiB on Linux, bytes on macOS
    return (
        proc.returncode,
        proc.stderr.splitlines(),
        maxrss / (MB if sys.platform == "darwin" else 1024),
    )


def streams(compress, data: bytes, copies: int) -> bytes:
    """`copies` concatenated streams of `data`: one content of copies x len(data) bytes."""
    return compress(data) * copies


# compressor of one stream, bytes of "x" per stream, streams: 512 MB of "x" on one line
ONE_LINE = {
    "bz2": (bz2.compress, 1 * MB, 512),  # 48 bytes a stream: 24 KB
    "xz": (lambda d: lzma.compress(d, preset=0), 4 * MB, 128),  # 93 KB
    "zst": (zstandard.ZstdCompressor(write_checksum=True).compress, 8 * MB, 64),  # 18 KB
    # gzip's reader was bounded already (ratio 1:1000 at most): the same promise, kept
    "gz": (lambda d: gzip.compress(d, 9), 8 * MB, 64),  # 520 KB
}


@pytest.mark.parametrize("ext", ONE_LINE)
def test_a_bomb_of_one_huge_line_is_refused_in_bounded_memory(tmp_path, ext):
    compress, size, copies = ONE_LINE[ext]
    path = tmp_path / f"en.txt.{ext}"
    path.write_bytes(streams(compress, b"x" * size, copies))
    code, err, peak = report_peak(tmp_path, path)
    assert code == 2 and err == [
        f"error: {path}: the line at byte 0 is longer than --max-doc-chars "
        "(1000000 characters); raise it or split the document"
    ], err
    assert peak < PEAK_MB, f"peak {peak:.0f} MB"


def test_a_bomb_of_many_short_lines_is_read_as_text_in_bounded_memory(tmp_path):
    # 192 MB of blank lines (16 KB of spaces each: not documents, so nothing is measured but
    # the last line) in 19 KB of zstd: read to the end, in bounded memory.
    path = tmp_path / "en.txt.zst"
    zc = zstandard.ZstdCompressor(write_checksum=True)
    blank = (b" " * (16 * 1024 - 1) + b"\n") * 512  # 8 MB
    path.write_bytes(streams(zc.compress, blank, 24) + zc.compress(b"the last line\n"))
    code, err, peak = report_peak(tmp_path, path, "--format", "json")
    assert code == 0 and err == [], err
    corpus = json.loads((tmp_path / "r.json").read_text())["corpus"]
    assert corpus["documents"] == 1 and corpus["chars"] == len("the last line")
    assert peak < PEAK_MB, f"peak {peak:.0f} MB"


# -- in process: what no memory figure needs ----------------------------------------------


def report(run, *args):
    code, out, err = run("report", *map(str, args), "-q", "--workers", "1", "--format", "json")
    return code, (json.loads(out) if code == 0 else None), err.splitlines()


def test_a_compressed_parquet_bomb_is_refused_at_the_spool_limit(run, tmp_path, monkeypatch):
    # The temporary file is kept where the test can see it: it stops at the limit, not at
    # 72 MB (a 3 MB .parquet.gz once made a 3 GB one).
    kept = tmp_path / "spool"
    monkeypatch.setattr(tempfile, "TemporaryFile", lambda *a, **k: open(kept, "w+b"))
    path = tmp_path / "en.parquet.gz"
    path.write_bytes(streams(lambda d: gzip.compress(d, 9), bytes(8 * MB), 9))  # 72 MB in 74 KB
    limit = 64 * MB  # fmt.PARQUET_SPOOL_MIN: 100x its 74 KB (fmt.PARQUET_SPOOL_RATIO) is less
    assert fmt.spool_limit(path.stat().st_size) == limit
    code, _, err = report(run, path)
    assert code == 2 and err == [
        f"error: {path}: decompresses to over {limit:,} bytes, more than a compressed parquet "
        "file may (100x its size, at least 64 MiB); store it uncompressed (parquet "
        "compresses its own columns)"
    ], err
    assert kept.stat().st_size <= limit


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_temporary_folder_is_named(run, tmp_path, monkeypatch):
    # /dev/full fails every write with ENOSPC, as a temporary folder that fills up does.
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setattr(tempfile, "TemporaryFile", lambda *a, **k: open("/dev/full", "w+b"))
    path = tmp_path / "en.parquet.zst"
    path.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(bytes(3 * MB)))
    code, _, err = report(run, path)
    assert code == 2 and err == [
        f"error: {path}: the temporary folder {folder} is full "
        f"({os.strerror(errno.ENOSPC)}) while decompressing; set TMPDIR to a folder with room"
    ], err


GOOD = "".join(f"line number {i} of the good part\n" for i in range(40)).encode()


def test_zstd_frames_without_a_checksum_are_warned_about_once_per_file(run, tmp_path):
    unchecked = zstandard.ZstdCompressor(write_checksum=False).compress
    checked = zstandard.ZstdCompressor(write_checksum=True).compress
    bare = tmp_path / "c/bare.txt.zst"
    bare.parent.mkdir()
    bare.write_bytes(unchecked(GOOD) + checked(GOOD) + unchecked(GOOD))
    (tmp_path / "c/sound.txt.zst").write_bytes(checked(GOOD) + checked(GOOD))
    code, rep, err = report(run, tmp_path / "c")
    assert code == 0 and rep["corpus"]["documents"] == 5 * len(GOOD.splitlines()), err
    assert err == [
        f"warning: {bare}: 2 of 3 zstd frame(s) without a content checksum: damage inside "
        "them cannot be detected (the zstd command writes one; Python zstandard needs "
        "write_checksum=True)"
    ]


def xz_with_dictionary(data: bytes, code: int) -> bytes:
    """An xz stream of `data` whose block header asks for dictionary size code `code`
    (36: 1 GiB), its header checksum made right: what `xz --lzma2=dict=1GiB` would write."""
    out = bytearray(lzma.compress(data, preset=0))
    size = (out[12] + 1) * 4  # the block header follows the 12-byte stream header
    at, flags = 14, out[13]
    for present in (0x40, 0x80):  # compressed, uncompressed size: varints when present
        if flags & present:
            while out[at] & 0x80:
                at += 1
            at += 1
    assert out[at : at + 2] == b"\x21\x01"  # LZMA2, one byte of properties
    out[at + 2] = code
    out[12 + size - 4 : 12 + size] = zlib.crc32(out[12 : 12 + size - 4]).to_bytes(4, "little")
    return bytes(out)


def zstd_with_window(data: bytes, window_log: int) -> bytes:
    """A zstd frame of `data` whose header asks for a window of 2**window_log bytes."""
    out = bytearray(zstandard.ZstdCompressor(write_content_size=False).compress(data))
    assert not out[4] & 0x20  # not single-segment: a window descriptor follows
    out[5] = (window_log - 10) << 3
    return bytes(out)


@pytest.mark.parametrize(
    "name, data, what",
    [
        ("en.txt.xz", xz_with_dictionary(GOOD, 36), "its xz dictionary"),  # 1 GiB
        ("en.txt.zst", zstd_with_window(GOOD, 28), "its zstd window"),  # 256 MiB
    ],
    ids=["xz", "zst"],
)
def test_a_stream_that_needs_too_much_memory_to_decompress_is_refused(
    run, tmp_path, name, data, what
):
    path = tmp_path / name
    path.write_bytes(data)
    code, _, err = report(run, path)
    assert code == 2 and err == [
        f"error: {path}: {what} needs over 128 MiB of memory to decompress; recompress it "
        "with a smaller one"
    ], err
    # the same data asking for what xz -9 (a 64 MiB dictionary) or zstd --long=27 does is read
    path.write_bytes(
        xz_with_dictionary(GOOD, 28) if name.endswith("xz") else zstd_with_window(GOOD, 27)
    )
    code, rep, _ = report(run, path)
    assert code == 0 and rep["corpus"]["documents"] == 40


# -- --max-doc-chars against the memory this process may take -------------------------------


def report_capped(tmp_path, address_space: int, *args):
    """(exit code, stderr lines) of `fertility report ARGS -q --workers 1 -o r.json` in a child
    whose address space is capped (RLIMIT_AS, what `ulimit -v` sets)."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "fertility.cli", "report", *map(str, args)]
        + ["-q", "--workers", "1", "-o", tmp_path / "r.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        preexec_fn=cap,
    )
    return proc.returncode, proc.stderr.splitlines()


def test_a_document_limit_the_memory_cannot_hold_is_refused_before_reading(run, tmp_path):
    # (before: `--max-doc-chars 2000000000` on a 300 MB line was read and measured until the
    # out-of-memory killer ended it at 23.4 GB, or, under a 6 GiB address space, the
    # interpreter aborted after 15 s). A document needs at least MIN_BYTES_PER_CHAR bytes a
    # character while it is measured: 50M characters at least 3.5 GiB.
    from fertility.options import MIN_BYTES_PER_CHAR

    path = tmp_path / "en.txt"
    path.write_bytes(b"x" * 200_000 + b"\n")  # what the line holds does not matter: unread
    out = tmp_path / "r.json"
    for limit, bound in [
        (50_000_000, "the address-space limit (ulimit -v) leaves"),  # capped at 3 GiB below
        (10**13, ""),  # 700 TiB: more than any machine has, without an address-space limit
    ]:
        if bound:
            code, err = report_capped(tmp_path, 3 << 30, path, "--max-doc-chars", limit)
        else:
            code, _, text = run("report", path, "--max-doc-chars", limit, "-q", "-o", out)
            err = text.splitlines()
        need = limit * MIN_BYTES_PER_CHAR / (1 << 30)
        assert code == 2 and len(err) == 1, err
        assert err[0].startswith(
            f"error: --max-doc-chars {limit:,}: measuring a document that long needs at least "
            f"{need:,.1f} GiB ({MIN_BYTES_PER_CHAR} bytes a character, several times more "
            "with most text and tokenizers), more than the "
        ), err
        assert err[0].endswith(f"{bound}; lower the limit or split the documents"), err
        assert not out.exists()


def test_a_huge_parquet_cell_is_refused_from_the_footer_in_bounded_memory(tmp_path):
    # (before: a 400 MB cell, 18 MB on disk, was decoded and made a Python string before the
    # length check: 1.72 GB peak). The row group's column holds 64 MB for 3 rows, more than 3
    # values within --max-doc-chars can: refused from the footer, nothing decoded.
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "en.parquet"
    cells = ["hello", "abcdefgh" * (8 * MB), "bye"]
    pq.write_table(pa.table({"text": cells}), path, compression="zstd")
    assert path.stat().st_size < MB  # a few KB: the cell is compressed away
    # its values, their 4-byte lengths and the page headers: the footer's figure
    size = pq.ParquetFile(path).metadata.row_group(0).column(0).total_uncompressed_size
    assert sum(map(len, cells)) < size < sum(map(len, cells)) + MB
    code, err, peak = report_peak(tmp_path, path)
    assert code == 2 and err == [
        f"error: {path}: row group 0 (rows 1-3) holds {size:,} "
        "bytes of column 'text', so one of its rows is longer than --max-doc-chars (1000000 "
        "characters); raise it or split the document"
    ], err
    assert peak < 200, f"peak {peak:.0f} MB"  # measured: 91 MB; before, 64 MB more 4 times over
