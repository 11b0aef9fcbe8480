"""The run-time switch to worker processes (fertility.measure.parallel.Switch): its decision
worked by hand from given timings, and a run that switches gives the report of one process."""

import os

import pandas as pd
import pytest

from fertility.corpus import CorpusOptions
from fertility.measure import analyze, parallel
from tests.measure.test_parallel import setup  # noqa: F401  (the module's corpus fixture)


def clock(*readings):
    """A fake (wall, cpu, machine idle) clock: the switch reads it once when made, then once
    per call."""
    it = iter(readings)
    return lambda: next(it)


def test_four_idle_cores_pay_for_workers():
    # 5 s of wall and of CPU (one busy core) for 100 of 1,000 bytes: 45 s left in one
    # process; 15 idle CPU seconds (3 cores); four workers can use min(4, 1 + 3) cores:
    # 1 s start + 0.5 s re-reading + 45 * 1 / 4 = 12.75 s <= 0.75 * 45
    s = parallel.Switch(1000, startup=1.0, cores=4, clock=clock((0, 0, 0), (5.0, 5.0, 15.0)))
    s.read_seconds = 0.5
    assert s(3, 100) is True and s.workers == 4
    assert s.decided == {
        "after_batch": 3,
        "busy_cores": 1.0,
        "idle_cores": 3.0,
        "left_s": 45.0,
        "projected_s": 12.8,
        "switch": True,
    }


def test_two_busy_cores_keep_one_process():
    # 9 CPU seconds in 5 s: 1.8 cores busy of 2, 0.2 idle; 1.5 + 45 * 1.8 / 2 = 42 s > 33.75 s
    s = parallel.Switch(1000, startup=1.0, cores=2, clock=clock((0, 0, 0), (5.0, 9.0, 1.0)))
    s.read_seconds = 0.5
    assert s(3, 100) is False and s.decided["projected_s"] == 42.0
    assert s(4, 200) is False  # decided once


def test_cores_that_other_jobs_use_are_no_room():
    # one core busy here, but the machine was never idle (another job held the other core):
    # workers could use min(2, 1 + 0) = 1 core, 1.5 + 45 s > 33.75 s
    busy = parallel.Switch(1000, 1.0, cores=2, clock=clock((0, 0, 0), (5.0, 5.0, 0.0)))
    busy.read_seconds = 0.5
    assert busy(3, 100) is False and busy.decided["idle_cores"] == 0.0
    # where the machine's idle time is unknown, cores - busy stands in: 1.5 + 45 / 2 = 24 s
    unknown = parallel.Switch(1000, 1.0, cores=2, clock=clock((0, 0, None), (5.0, 5.0, None)))
    unknown.read_seconds = 0.5
    assert unknown(3, 100) is True and unknown.decided["idle_cores"] == 1.0


def test_no_decision_before_the_probe_or_near_the_end():
    early = parallel.Switch(1000, 1.0, cores=4, clock=clock((0, 0, 0), (1.0, 1.0, 3.0)))
    assert early(0, 100) is False and early.decided is None
    # 900 of 1,000 bytes in 5 s: 0.56 s left, less than a worker's start
    late = parallel.Switch(1000, 1.0, cores=4, clock=clock((0, 0, 0), (5.0, 5.0, 15.0)))
    assert late(9, 900) is False and late.decided["left_s"] == 0.6
    one = parallel.Switch(1000, 1.0, cores=1, clock=clock((0, 0, 0), (5.0, 5.0, 0.0)))
    assert one(3, 100) is False and one.decided is None  # one core: nowhere to put a worker


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux only: /proc/stat")
def test_the_machine_idle_time_is_read_from_proc_stat():
    # a second method: the fourth and fifth numbers of /proc/stat's first line, in ticks
    first = open("/proc/stat").readline().split()
    by_hand = (int(first[4]) + int(first[5])) / os.sysconf("SC_CLK_TCK")
    got = parallel._idle_seconds()
    assert by_hand <= got < by_hand + 5 * os.cpu_count()  # read a moment later


def test_a_run_that_switches_gives_the_report_of_one_process(setup, monkeypatch):  # noqa: F811
    corpus, tok = setup
    kw = dict(pretokenizers=["gpt2"], batch_size=64, detail_docs=30, keep_docs=1000, seed=5)
    one = analyze([corpus], [f"bpe={tok}"], workers=1, **kw)
    # decide after the first batch, and always for workers
    monkeypatch.setattr(parallel, "PROBE_SECONDS", 0.0)
    monkeypatch.setattr(parallel, "MARGIN", 1e9)
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    switched = analyze([corpus], [f"bpe={tok}"], **kw)
    assert switched.settings["workers"] == 2 and one.settings["workers"] == 1
    assert switched.settings["switch"]["after_batch"] == 0
    assert switched.settings["switch"]["switch"] is True
    pd.testing.assert_frame_equal(one.frame, switched.frame)  # intervals included
    pd.testing.assert_frame_equal(one.docs, switched.docs)
    assert one.corpus == switched.corpus
    assert one.samples == switched.samples
    assert one.normalization == switched.normalization
    assert one.roundtrip == switched.roundtrip
    assert one.byte_fallback_chars == switched.byte_fallback_chars


def test_a_switch_says_each_corpus_warning_once(setup, tmp_path, monkeypatch):  # noqa: F811
    corpus, tok = setup
    (tmp_path / "a.txt").write_bytes(b"bad \xff line\n" + b"word word\n" * 300)
    (tmp_path / "b.txt").write_bytes(b"more words here\n" * 300)
    monkeypatch.setattr(parallel, "PROBE_SECONDS", 0.0)
    monkeypatch.setattr(parallel, "MARGIN", 1e9)
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    said = []
    report = analyze(
        [tmp_path], [str(tok)], batch_size=64, corpus_options=CorpusOptions(on_warning=said.append)
    )
    assert report.settings["switch"]["switch"] is True
    assert len(said) == 1 and "invalid UTF-8" in said[0] and "a.txt" in said[0]
