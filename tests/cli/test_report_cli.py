"""`fertility report` end to end through the command's entry point: outputs and bad input."""

import gzip
import json

import pytest
from tokenizers import Tokenizer

from tests.bpe import byte_level_bpe
from tests.textdata import SENTENCE


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    byte_level_bpe([SENTENCE, "Rain fell. Rivers rose!"] * 20, 300, path=path)
    return path


@pytest.fixture()
def corpus(tmp_path):
    (tmp_path / "bn.txt").write_text((SENTENCE + "\n") * 3, encoding="utf-8")
    (tmp_path / "en.txt").write_text("Rain fell. Rivers rose!\n" * 3, encoding="utf-8")
    return tmp_path


def test_table_json_and_csv(run, corpus, tok_path):
    vocab = Tokenizer.from_file(str(tok_path)).get_vocab_size()
    code, out, _ = run("report", str(corpus), "-t", f"bpe={tok_path}", "-q")
    assert code == 0 and f"bpe (hf, vocab {vocab})" in out and "language:bn" in out
    code, out, _ = run("report", str(corpus), "-t", f"bpe={tok_path}", "--format", "json", "-q")
    data = json.loads(out)
    assert data["schema"] == "fertility.report/1"
    assert data["corpus"]["documents"] == 6 and data["corpus"]["files"]
    (t,) = data["tokenizers"]
    assert (t["label"], t["kind"], t["vocab_size"]) == ("bpe", "hf", vocab)
    bn = next(r for r in t["rows"] if r["group"] == "language" and r["key"] == "bn")
    assert bn["chars"] == 60 and bn["documents"] == 3
    for field in (
        "graphemes",
        "bytes",
        "words",
        "tokens",
        "chars_per_token",
        "graphemes_per_token",
        "bytes_per_token",
        "tokens_per_word",
        "continued_word_rate",
        "unk_rate",
        "byte_fallback_rate",
        "token_share",
        "byte_share",
        "unique_tokens",
        "chars_per_token_lo",
        "chars_per_token_hi",
        "roundtrip_failure_rate",
    ):
        assert field in bn
    out_file = corpus.parent / "r.csv"
    code, _, _ = run(
        "report", str(corpus), "-t", str(tok_path), "--format", "csv", "-o", str(out_file), "-q"
    )
    header = out_file.read_text().splitlines()[0].split(",")
    assert header[:4] == ["tokenizer", "kind", "group", "key"] and "chars_per_token" in header


def test_no_tokenizer_profiles_and_says_how(run, corpus, monkeypatch):
    monkeypatch.chdir(corpus)
    code, out, _ = run("report", str(corpus), "-q")
    assert code == 0 and "no tokenizer named" in out and "gpt2" in out


def test_tokenizers_from_fertility_toml(run, corpus, tok_path, monkeypatch):
    (corpus.parent / "fertility.toml").write_text(f'tokenizers = ["cfg={tok_path}"]\n')
    monkeypatch.chdir(corpus.parent)
    code, out, _ = run("report", str(corpus), "--format", "json", "-q")
    assert json.loads(out)["tokenizers"][0]["label"] == "cfg"


def test_subset_is_reported(run, corpus, tok_path):
    code, out, _ = run(
        "report", str(corpus), "-t", str(tok_path), "--max-docs", "4", "--format", "json", "-q"
    )
    c = json.loads(out)["corpus"]
    assert c["documents"] == 4 and c["max_docs"] == 4 and c["stopped_early"] is True


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda d: d / "missing.txt", "missing.txt"),
        (lambda d: (d / "empty.txt").write_text("\n\n") and d / "empty.txt", "no documents"),
        (
            lambda d: (
                (d / "bad.txt.gz").write_bytes(gzip.compress(b"hello\n")[:-6]) and d / "bad.txt.gz"
            ),
            "bad.txt.gz",
        ),
    ],
)
def test_bad_corpus_is_one_line_exit_2(run, tmp_path, make, needle):
    code, out, err = run("report", str(make(tmp_path)), "-q")
    assert code == 2 and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_invalid_utf8_counted_or_strict(run, tmp_path, tok_path):
    (tmp_path / "en.txt").write_bytes(b"good line\nbad \xff\xfe line\n")
    code, out, err = run("report", str(tmp_path), "-t", str(tok_path), "--format", "json")
    assert code == 0 and "warning" in err
    # 0xFF and 0xFE are each a maximal invalid sequence: two replacements
    assert list(json.loads(out)["corpus"]["invalid_utf8"].values()) == [2]
    code, _, err = run("report", str(tmp_path), "-t", str(tok_path), "--strict")
    assert code == 2 and "en.txt" in err and "byte" in err


def test_binary_file_skipped_with_warning(run, tmp_path, tok_path):
    (tmp_path / "en.txt").write_text("fine\n")
    (tmp_path / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    code, out, err = run("report", str(tmp_path), "-t", str(tok_path), "--format", "json")
    assert code == 0 and "blob.txt" in err
    assert json.loads(out)["corpus"]["binary_files"][0]["path"].endswith("blob.txt")


def test_bad_tokenizer_file_is_one_line_exit_2(run, corpus, tmp_path_factory):
    bad = tmp_path_factory.mktemp("badtok") / "tokenizer.json"
    bad.write_text('{"truncated": ')
    code, _, err = run("report", str(corpus), "-t", str(bad), "-q")
    assert code == 2 and "tokenizer.json" in err and len(err.strip().splitlines()) == 1


def test_workers_beyond_the_cores_are_capped_and_said(run, corpus, tok_path, monkeypatch):
    # `--workers 100000` was still starting processes after 120 s (the run takes 1.2 s).
    # On a machine of one usable core it measures in this one process, and says so.
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    args = ("report", corpus, "-t", tok_path, "--format", "json", "-q")
    code, out, err = run(*args, "--workers", 100000)
    assert code == 0 and json.loads(out)["settings"]["workers"] == 1, err
    assert err.splitlines() == [
        "warning: --workers 100,000: more than the 1 core(s) this process may use; using 1"
    ]
    code, out, err = run(*args, "--workers", 1)  # within the cores: as asked, nothing said
    assert code == 0 and json.loads(out)["settings"]["workers"] == 1 and err == ""


def test_one_path_for_the_report_and_the_plots_is_refused_before_any_work(
    run, corpus, tmp_path_factory
):
    # (before: the report was written, then the plots refused: `same.html` left behind)
    out = tmp_path_factory.mktemp("out")  # beside the corpus, not inside it
    same = out / "same.html"
    code, _, err = run("report", corpus, "--format", "html", "-o", same, "--plots", same, "-q")
    assert code == 2 and err.splitlines() == [
        f"error: {same}: named as both -o/--output and --plots; give each output its own place"
    ]
    inside = out / "plots" / "r.html"
    inside.parent.mkdir()
    code, _, err = run("report", corpus, "-o", inside, "--plots", inside.parent, "-q")
    assert code == 2 and err.splitlines() == [
        f"error: {inside}: lies inside the --plots folder {inside.parent}; write the report "
        "elsewhere"
    ]
    assert [p.name for p in out.rglob("*")] == ["plots"]  # nothing written


@pytest.mark.parametrize("fmt", ["table", "json", "leaderboard", "html"])
def test_the_rules_run_once_even_when_none_fires(run, corpus, tok_path, monkeypatch, fmt):
    """The report's findings are what its verdicts weigh: the verdict of the table, the JSON
    and the leaderboard reuses them, an empty list included, instead of running every rule
    again. With --no-diagnose there are none, so the JSON's verdict runs them itself."""
    from fertility.findings import diagnosis

    calls = []
    monkeypatch.setattr(diagnosis, "diagnose", lambda *a, **k: calls.append(1) or [])
    args = ("report", corpus, "-t", tok_path, "--format", fmt, "-q")
    code, out, err = run(*args, "-o", corpus.parent / f"r.{fmt}")
    assert code == 0 and len(calls) == 1, err
    calls.clear()
    code, _, err = run(*args, "--no-diagnose", "-o", corpus.parent / f"s.{fmt}")
    assert code == 0 and len(calls) == (1 if fmt in ("json", "leaderboard") else 0), err


PANDAS_FREE = """
import sys
from fertility.cli import COMMANDS, main

try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code or 0
else:
    code = 0
others = {module for name, (module, _) in COMMANDS.items() if name != sys.argv[1]}
print(code, *sorted(({"pandas", "pyarrow"} | others) & set(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{corpus}", "-t", "{tok}", "-q"],
        ["report", "{corpus}", "-t", "{tok}", "-q", "--format", "json", "--parallel"],
        ["gate", "{corpus}", "-t", "{tok}", "-q", "--baseline", "{tok2}", "--parallel"],
    ],
)
def test_the_table_json_and_gate_load_no_pandas(tmp_path, tok_path, tmp_path_factory, argv):
    """The table, the JSON and the gate read Report.table, never the pandas frame: pandas
    with pyarrow cost a small report 0.4 s and 80 MB before (#36). The two files align line
    for line (line i is i + 1 copies of a sentence in both), so the premiums (--parallel)
    and the baseline's per-document check are computed too; the process prints its exit
    code and which of the two modules it loaded, and of the other commands' modules (a
    command imports its own: 10 ms of every start)."""
    import subprocess
    import sys

    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in (("bn.txt", SENTENCE), ("en.txt", "Rain fell. Rivers rose! ")):
        lines = [" ".join([text.strip()] * (i + 1)) for i in range(12)]
        (corpus / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    other = tmp_path_factory.mktemp("tok2") / "tokenizer.json"
    byte_level_bpe([SENTENCE] * 20, 280, path=other)
    args = [a.format(corpus=corpus, tok=f"bpe={tok_path}", tok2=f"base={other}") for a in argv]
    out = subprocess.run(
        [sys.executable, "-c", PANDAS_FREE, *args], capture_output=True, text=True, timeout=120
    )
    *_, last = out.stderr.strip().splitlines()
    assert last in ("0", "1"), out.stderr  # 1: the gate's "no"; no module named after it
