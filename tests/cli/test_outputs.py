"""Where `fertility report -o` writes, and what any failure looks like: one line, exit 2.

The expected report text comes from a second run to stdout (the same command, no -o)."""

import os
import stat
import subprocess
import sys

import pytest

from tests.textdata import SENTENCE


@pytest.fixture()
def corpus(tmp_path):
    (tmp_path / "bn.txt").write_text((SENTENCE + "\n") * 3, encoding="utf-8")
    return tmp_path / "bn.txt"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _report_on_stdout(run, corpus) -> str:
    code, out, _ = run("report", corpus, "--format", "csv", "-q")
    assert code == 0 and out.startswith("tokenizer,")
    return out


def test_symlink_is_written_through(run, corpus, tmp_path):
    target, link = tmp_path / "real.csv", tmp_path / "link.csv"
    code, _, _ = run("report", corpus, "--format", "json", "-o", target, "-q")  # ours, stale
    assert code == 0 and target.read_text().startswith("{")
    link.symlink_to(target.name)
    code, _, _ = run("report", corpus, "--format", "csv", "-o", link, "-q")
    assert code == 0 and link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text() == _report_on_stdout(run, corpus)


def test_fifo_is_written_in_place_not_replaced(run, corpus, tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the writer can open
    try:
        code, _, err = run("report", corpus, "--format", "csv", "-o", fifo, "-q")
        got = b""
        while chunk := os.read(reader, 1 << 16):
            got += chunk
    finally:
        os.close(reader)
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got.decode() == _report_on_stdout(run, corpus)


def test_dash_is_stdout(run, corpus, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("report", corpus, "--format", "csv", "-o", "-", "-q")
    assert code == 0 and out == _report_on_stdout(run, corpus)
    assert not (tmp_path / "-").exists()


def test_empty_output_name_is_one_line(run, corpus):
    code, _, err = run("report", corpus, "-o", "", "-q")
    assert code == 2 and "empty file name" in _one_error_line(err)


def test_output_into_a_folder_is_one_line(run, corpus, tmp_path):
    code, _, err = run("report", corpus, "-o", tmp_path, "-q")
    assert code == 2 and f"{tmp_path}: is a folder" in _one_error_line(err)


def test_stale_partial_of_a_dead_run_is_removed_a_live_ones_kept(run, corpus, tmp_path):
    out = tmp_path / "r.csv"
    dead = tmp_path / ".r.csv.fertility-partial-999999999"  # above any pid_max: none such
    live = tmp_path / ".r.csv.fertility-partial-1"  # init is always alive
    dead.write_text("half")
    live.write_text("half")
    code, _, _ = run("report", corpus, "--format", "csv", "-o", out, "-q")
    assert code == 0 and not dead.exists() and live.exists()


def test_full_stdout_is_one_line_exit_2(corpus):
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "fertility.cli", "report", str(corpus), "-q"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=corpus.parent,
        )
    assert proc.returncode == 2
    assert _one_error_line(proc.stderr) == "error: stdout: cannot write (No space left on device)"


def test_full_device_as_output_is_one_line_exit_2(run, corpus, tmp_path):
    full = "/dev/full"
    if os.geteuid() == 0:  # root could replace the real node: give it a node of its own
        full = tmp_path / "full"
        os.mknod(full, 0o666 | stat.S_IFCHR, os.stat("/dev/full").st_rdev)
    code, _, err = run("report", corpus, "-o", full, "-q")
    assert code == 2
    assert _one_error_line(err) == f"error: {full}: cannot write (No space left on device)"
    assert stat.S_ISCHR(os.stat(full).st_mode)


@pytest.mark.parametrize(
    "exc, needle",
    [
        (RuntimeError("boom"), "unexpected RuntimeError: boom"),
        (MemoryError(), "out of memory"),
        (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
    ],
)
def test_unexpected_error_is_exit_2_one_line_traceback_with_debug(
    run, corpus, monkeypatch, exc, needle
):
    import fertility.measure

    def broken(*a, **k):
        raise exc

    monkeypatch.setattr(fertility.measure, "analyze", broken)
    code, _, err = run("report", corpus, "-q")
    line = _one_error_line(err)
    assert code == 2 and needle in line and "--debug" in line
    code, _, err = run("--debug", "report", corpus, "-q")
    assert code == 2 and "Traceback (most recent call last)" in err and needle in err


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["report", "{c}", "--detail", "x"],
            "error: Invalid value for '--detail': expected a "
            "number of documents or 'all' (see `fertility report --help`)",
        ),
        (["report"], "error: Missing argument 'PATHS...'. (see `fertility report --help`)"),
        (
            ["report", "{c}", "--nope"],
            "error: No such option '--nope'. (see `fertility report --help`)",
        ),
        (["bogus"], "error: No such command 'bogus'. (see `fertility --help`)"),
    ],
)
def test_usage_error_is_one_line_exit_2(run, corpus, argv, line):
    code, _, err = run(*[a.format(c=corpus) for a in argv])
    assert code == 2 and _one_error_line(err) == line
