"""`fertility extend` as a command: its files, its exit codes, its refusals (no fixtures)."""

import io
import json
from pathlib import Path

import pytest
import sentencepiece as spm
from tokenizers import Tokenizer

from tests.bpe import byte_level_bpe

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"


def _lines(lang: str) -> list[str]:
    return [x for x in (CORPUS / f"{lang}.txt").read_text(encoding="utf-8").splitlines() if x]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = tmp_path_factory.mktemp("base") / "tokenizer.json"
    byte_level_bpe(
        [*_lines("en"), *_lines("es"), *_lines("ru")], 700, specials=["<|endoftext|>"], path=path
    )
    return path


def test_extend_writes_its_files_and_keeps_english_ids(run, base, tmp_path):
    code, out, err = run(
        "extend",
        base,
        CORPUS,
        "--add",
        "150",
        "--out",
        tmp_path / "x",
        "--langs",
        "bn",
        "--heldout",
        "0.2",
    )
    assert code in (0, 1), err  # 1: the extended tokenizer fails the gate (files written)
    for name in ("tokenizer.json", "ids-map.json", "extend-report.json", "heldout/bn.jsonl"):
        assert (tmp_path / "x" / name).is_file()
    assert "split pattern widened" in out and r"\p{M}" in out
    rep = json.loads((tmp_path / "x" / "extend-report.json").read_text(encoding="utf-8"))
    assert rep["schema"] == "fertility.extend/1" and rep["langs"] == ["bn"]
    assert rep["tokenizer"]["first_new_id"] == 700
    old, new = (
        Tokenizer.from_file(str(base)),
        Tokenizer.from_file(str(tmp_path / "x" / "tokenizer.json")),
    )
    assert new.get_vocab_size() == 700 + rep["tokenizer"]["added"]
    for t in _lines("en"):
        assert (
            new.encode(t, add_special_tokens=False).ids
            == old.encode(t, add_special_tokens=False).ids
        )
    held = [
        json.loads(x)["text"]
        for x in (tmp_path / "x" / "heldout" / "bn.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    ratio = sum(len(new.encode(t).ids) for t in held) / sum(len(old.encode(t).ids) for t in held)
    assert ratio < 0.5  # Bengali takes under half the tokens it took


def _one_line_error(code, err, *words):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    for w in words:
        assert w in lines[0]


def test_wordpiece_base_is_refused_in_one_line(run, tmp_path):
    from tokenizers import models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        _lines("en"),
        trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]"], show_progress=False),
    )
    tok.save(str(tmp_path / "wp.json"))
    code, _, err = run(
        "extend",
        tmp_path / "wp.json",
        CORPUS,
        "--add",
        "10",
        "--out",
        tmp_path / "x",
        "--langs",
        "bn",
    )
    _one_line_error(code, err, "wordpiece", "not supported")


def test_sentencepiece_base_gets_pieces_after_its_own(run, tmp_path):
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_lines("en") * 3), model_writer=buf, vocab_size=300, minloglevel=2
    )
    (tmp_path / "sp.model").write_bytes(buf.getvalue())
    code, out, err = run(
        "extend",
        tmp_path / "sp.model",
        CORPUS,
        "--add",
        "100",
        "--out",
        tmp_path / "x",
        "--langs",
        "bn",
        "--heldout",
        "0.2",
    )
    assert code in (0, 1), err
    base = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    ext = spm.SentencePieceProcessor(model_file=str(tmp_path / "x" / "tokenizer.model"))
    assert ext.get_piece_size() > 300
    assert [ext.id_to_piece(i) for i in range(300)] == [base.id_to_piece(i) for i in range(300)]
    assert ext.encode(_lines("en")) == base.encode(_lines("en"))
    assert not (tmp_path / "x" / "tokenizer.json").exists()


def test_bad_input_is_one_line_exit_2(run, base, tmp_path):
    code, _, err = run(
        "extend", tmp_path / "none.json", CORPUS, "--add", "10", "--out", tmp_path / "x"
    )
    _one_line_error(code, err, "no such file")
    code, _, err = run(
        "extend", base, CORPUS, "--add", "10", "--out", tmp_path / "y", "--langs", "xx"
    )
    _one_line_error(code, err, "--langs", "xx")
    (tmp_path / "file").write_text("x")
    code, _, err = run(
        "extend", base, CORPUS, "--add", "10", "--out", tmp_path / "file", "--langs", "bn"
    )
    _one_line_error(code, err, "not a folder")


def test_without_langs_the_languages_the_gate_fails_are_extended(run, base, tmp_path):
    code, out, err = run(
        "extend", base, CORPUS, "--add", "50", "--out", tmp_path / "x", "--heldout", "0.2"
    )
    assert code in (0, 1), err
    rep = json.loads((tmp_path / "x" / "extend-report.json").read_text(encoding="utf-8"))
    assert rep["langs_from"] == "gate"
    # `fertility gate` on the base, over the same held-out documents, fails each of them
    code, gate_out, _ = run(
        "gate", tmp_path / "x" / "heldout", "--lang-field", "lang", "-t", base, "--format", "json"
    )
    assert code == 1
    checks = json.loads(gate_out)["checks"]
    failed = {c["key"] for c in checks if c["verdict"] == "fail" and c["group"] == "language"}
    scripts = {c["key"] for c in checks if c["verdict"] == "fail" and c["group"] == "script"}
    assert "Beng" in scripts and "Beng" in rep["scripts"]
    assert "bn" in rep["langs"] and failed <= set(rep["langs"])
