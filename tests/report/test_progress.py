"""Progress on stderr: a percentage and an ETA where the total is known (the corpus's size, a
step count), the time so far on each stage's line, a last line with the time taken; nothing
when the stream is not a terminal or the command is quiet."""

from __future__ import annotations

import io
from pathlib import Path

from fertility import progress as P
from fertility.corpus import Corpus

ROOT = Path(__file__).resolve().parents[2]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    """time.perf_counter and time.monotonic, moved by hand."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def lines(stream: Tty) -> list[str]:
    """What a terminal shows: each \\r\\033[K starts the line again."""
    return [x for x in stream.getvalue().replace("\033[K", "").replace("\r", "\n").split("\n") if x]


def test_meter_text_by_hand():
    # 30 of 120 done in 10 s: 25%, the other 90 at 3 per second take 30 s
    assert P.meter_text(30, 120, 10.0) == "25%, ETA 0:30"
    assert P.meter_text(119.9, 120, 3600.0) == "99%, ETA 0:03"  # never 100% before the end
    assert P.meter_text(0, 120, 5.0) == "" and P.meter_text(5, None, 5.0) == ""
    assert P.clock(3725) == "1:02:05" and P.clock(65) == "1:05"


def test_measuring_shows_the_share_of_the_corpus_and_the_time_left(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(P.time, "perf_counter", clock)
    monkeypatch.setattr(P.time, "monotonic", clock)
    total = P.corpus_bytes(Corpus([ROOT / "examples/corpus"]))
    # the files' sizes, read a second way
    assert total == sum(p.stat().st_size for p in (ROOT / "examples/corpus").glob("*.txt"))
    out = Tty()
    prog = P.Progress("measuring", total_bytes=total, stream=out)
    clock.t += 4.0
    prog(150, total // 4)
    clock.t += 8.0
    prog(600, total)
    prog.done()
    shown = lines(out)
    # a quarter in 4 s: the other three quarters take 12 s more
    assert shown[0].startswith("measuring: 25%, ETA 0:12,") and "150 documents" in shown[0]
    assert shown[-1] == f"measuring: 600 documents, {total / 1e6:,.1f} MB in 0:12"
    assert out.getvalue().endswith("\n")


def test_max_docs_is_the_total_when_it_ends_the_run_first(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(P.time, "perf_counter", clock)
    monkeypatch.setattr(P.time, "monotonic", clock)
    out = Tty()
    prog = P.Progress("measuring", total_bytes=10_000_000, max_docs=200, stream=out)
    clock.t += 2.0
    prog(100, 1_000_000)  # half the documents, a tenth of the bytes
    assert lines(out)[0].startswith("measuring: 50%, ETA 0:02,")


def test_compressed_corpus_has_no_total(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n", encoding="utf-8")
    assert P.corpus_bytes(Corpus([tmp_path])) == 6
    (tmp_path / "b.txt.gz").write_bytes(b"\x1f\x8b" + bytes(20))
    assert P.corpus_bytes(Corpus([tmp_path])) is None  # a compressed file's size is not its text's


def test_silent_off_a_terminal_or_quiet():
    for stream, quiet in ((io.StringIO(), False), (Tty(), True)):
        prog = P.Progress("measuring", total_bytes=10, stream=stream, quiet=quiet)
        prog(1, 5)
        prog.done()
        stages = P.Stages(quiet=quiet, stream=stream)
        stages("fix: training")
        stages.meter("fix: feeding", 10, "chars")(5)
        stages.corpus("fix: reading", Corpus([ROOT / "examples/corpus"]))(1, 5)
        with stages.waiting("fix: training", "no percentage").begin():
            pass
        stages.done("fix")
        assert stream.getvalue() == ""


def test_stages_and_counted_messages_say_the_time(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(P.time, "perf_counter", clock)
    monkeypatch.setattr(P.time, "monotonic", clock)
    out = Tty()
    stages = P.Stages(stream=out)
    clock.t += 65
    stages("fix: training bpe")
    stages.done("fix")
    assert out.getvalue() == "[1:05] fix: training bpe\nfix: done in 1:05\n"
    out = Tty()
    timed = P.Timed(stream=out)
    timed.update("scoring model: 10/40 windows")
    clock.t += 5  # 20 of 40 in the 5 s since the stage's first line: 5 s left
    timed.update("scoring model: 20/40 windows", force=True)
    assert lines(out)[-1] == "[0:05] scoring model: 20/40 windows (50%, ETA 0:05)"
