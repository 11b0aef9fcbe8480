"""`fertility report --workers 2` ended by SIGTERM or SIGKILL: no measuring process (nor the
multiprocessing resource tracker) outlives it, and no partial output is left.

Processes are read from /proc (psutil is not a dependency); every process a test saw is
killed at the end, whatever the assertions said, so a failing test leaves nothing behind."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.textdata import SENTENCE

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _ppid_and_state(pid: int) -> tuple[int, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return int(fields[1]), fields[0]


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _ppid_and_state(int(entry))
            if info and info[0] == pid:
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    info = _ppid_and_state(pid)
    return info is not None and info[1] != "Z"  # a zombie has ended; only its entry waits


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory):
    """Enough text that two workers are still measuring seconds after they start."""
    folder = tmp_path_factory.mktemp("big")
    line = " ".join([SENTENCE, "Rain fell on the river, 1234 times!"] * 6) + "\n"
    (folder / "bn.txt").write_text(line * 60_000, encoding="utf-8")
    return folder


def _start_and_wait_for_workers(corpus: Path, out: Path, err: Path):
    # stderr to a file, not a pipe: a surviving worker would hold a pipe open
    with err.open("w") as err_stream:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fertility.cli",
                "report",
                str(corpus),
                "--workers",
                "2",
                "--pretokenizers",
                "o200k",
                "--format",
                "json",
                "-o",
                str(out),
                "-q",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err_stream,
            cwd=corpus,
        )
    deadline = time.monotonic() + 20
    seen: set[int] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        seen |= _children(proc.pid)
        # two workers and the resource tracker, all children of the run
        if len(seen) >= 3:
            break
        time.sleep(0.1)
    return proc, seen


def _stop(proc, seen) -> None:
    for pid in seen | {proc.pid}:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)


def _survivors(seen: set[int], within_s: float) -> set[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = {p for p in seen if _alive(p)}
        if not alive:
            return set()
        time.sleep(0.1)
    return alive


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_signal_ends_every_worker_and_leaves_no_output(big_corpus, tmp_path, sig):
    (tmp_path / "out").mkdir()
    out, err_file = tmp_path / "out" / "report.json", tmp_path / "stderr.txt"
    proc, seen = _start_and_wait_for_workers(big_corpus, out, err_file)
    try:
        assert proc.poll() is None and len(seen) >= 3, (
            f"the run must still be measuring with its workers (children seen: {seen})"
        )
        time.sleep(0.5)  # the workers are inside their measuring loop
        os.kill(proc.pid, sig)
        code = proc.wait(timeout=15)
        err = err_file.read_text()
        if sig == signal.SIGTERM:
            assert code == 143 and err.strip().splitlines() == ["terminated"], (code, err)
        else:
            assert code == -signal.SIGKILL
        assert _survivors(seen, within_s=5) == set()
        assert os.listdir(tmp_path / "out") == []  # no report, no .partial file
    finally:
        _stop(proc, seen)
