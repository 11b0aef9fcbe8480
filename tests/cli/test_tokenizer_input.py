"""Hostile tokenizer files, split patterns and `hf:` without a network: each is one line
`error: <file>: <what>` and exit 2, in bounded time, never a traceback or a hang."""

import base64
import json
import os
import subprocess
import sys
import time

import pytest
import regex

from tests.textdata import SENTENCE


@pytest.fixture()
def corpus(tmp_path):
    (tmp_path / "bn.txt").write_text((SENTENCE + "\n") * 3, encoding="utf-8")
    return tmp_path / "bn.txt"


@pytest.fixture()
def byte_ranks(tmp_path):
    """A tiktoken rank file of the 256 single bytes (no merges)."""
    path = tmp_path / "bytes.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)))
    return path


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_deeply_nested_tokenizer_json(run, corpus, tmp_path):
    deep = tmp_path / "tokenizer.json"
    deep.write_text('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run("report", corpus, "-t", deep, "-q")
    assert (
        code == 2
        and _one_error_line(err) == f"error: {deep}: JSON nested too deeply to be a tokenizer"
    )


def test_huge_token_id_is_refused_before_any_table_is_built(run, corpus, tmp_path):
    wl = tmp_path / "wordlevel.json"
    wl.write_text(
        json.dumps(
            {
                "version": "1.0",
                "truncation": None,
                "padding": None,
                "added_tokens": [],
                "normalizer": None,
                "pre_tokenizer": {"type": "Whitespace"},
                "post_processor": None,
                "decoder": None,
                "model": {
                    "type": "WordLevel",
                    "vocab": {"a": 0, "[UNK]": 2_000_000_000},
                    "unk_token": "[UNK]",
                },
            }
        )
    )
    t0 = time.perf_counter()
    code, _, err = run("report", corpus, "-t", wl, "-q")
    assert code == 2 and "token id 2,000,000,000 is beyond" in _one_error_line(err)
    assert time.perf_counter() - t0 < 30


def test_huge_rank_in_a_rank_file(run, corpus, byte_ranks):
    with byte_ranks.open("ab") as f:
        f.write(base64.b64encode(b"ab") + b" 2000000000\n")
    code, _, err = run("report", corpus, "-t", f"{byte_ranks}#o200k", "-q")
    assert code == 2 and f"{byte_ranks}: line 257: token id 2,000,000,000" in _one_error_line(err)


@pytest.mark.parametrize("make", ["/dev/zero", "fifo"])
def test_non_regular_file_is_refused_not_read(run, corpus, tmp_path, make):
    path = make
    if make == "fifo":
        path = tmp_path / "tokenizer.fifo"
        os.mkfifo(path)  # opening it to read would wait for a writer forever
    code, _, err = run("report", corpus, "-t", path, "-q")
    assert code == 2 and _one_error_line(err) == f"error: {path}: not a regular file"


def test_pattern_matching_the_empty_string(run, corpus, byte_ranks):
    # tiktoken's Rust core panics on such a pattern (and prints a Rust backtrace)
    code, _, err = run("report", corpus, "-t", f"{byte_ranks}#re:x*", "-q")
    assert code == 2 and "split pattern 're:x*' matches the empty string" in _one_error_line(err)


def test_catastrophic_backtracking_is_stopped(run, tmp_path, monkeypatch):
    import fertility.tokenizers.patterns

    monkeypatch.setattr(fertility.tokenizers.patterns, "TIMEOUT_S", 0.5)
    line = "a" * 35 + "c"  # (a|a)+ tries 2^35 ways to fail before the fallback matches
    (tmp_path / "x.txt").write_text(line + "\n")
    # the same pattern without the ambiguous alternative cuts the line in one match
    assert [m.span() for m in regex.finditer(r"\S+|\s+", line)] == [(0, 36)]
    t0 = time.perf_counter()
    code, _, err = run("report", tmp_path / "x.txt", "--pretokenizers", r"re:(a|a)+b|\S+|\s+", "-q")
    assert code == 2 and "catastrophic backtracking" in _one_error_line(err)
    assert time.perf_counter() - t0 < 30


def _fertility(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "fertility.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in {**os.environ, **env}.items() if v is not None},
    )


def _unreachable_hub(tmp_path) -> dict:
    # port 9 (discard) on localhost: refused at once, no network involved
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        env[key] = None  # unset
    return env


def test_hf_without_hub_or_cache_is_one_quick_line(corpus, tmp_path):
    t0 = time.perf_counter()
    proc = _fertility(
        "report", corpus, "-t", "hf:someone/tok", "-q", env=_unreachable_hub(tmp_path)
    )
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 2 and _one_error_line(proc.stderr) == (
        "error: hf:someone/tok: cannot reach the Hugging Face hub and no tokenizer.json or "
        "tokenizer.model for it in the local cache"
    )
    assert elapsed < 20  # the library's own retries took 47 s


def test_hf_without_hub_reads_the_cache(corpus, tmp_path):
    from tests.bpe import byte_level_bpe

    env = _unreachable_hub(tmp_path)
    repo = tmp_path / "hf" / "hub" / "models--someone--tok"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit / "tokenizer.json"
    tok = byte_level_bpe([SENTENCE] * 20, 300, path=snapshot)
    proc = _fertility("report", corpus, "-t", "hf:someone/tok", "--format", "json", "-q", env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    (row,) = [r for r in json.loads(proc.stdout)["tokenizers"][0]["rows"] if r["group"] == "all"]
    assert row["tokens"] == 3 * len(tok.encode(SENTENCE).ids)
