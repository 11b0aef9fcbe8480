"""`fertility fix`: the walkthrough's claim on a small corpus, special-token ids kept from
--from, the held-out discipline, atomic writes and the one-line errors.

The claim needs a corpus where held-out text is made of words the training text has (what a
real corpus of millions of lines gives): the small corpus here draws sentences from a closed
lexicon of real Bengali and English words taken from examples/corpus. Every figure the test
compares is recomputed here by encoding the held-out documents with the `tokenizers` library
directly, not read from fix's own report.
"""

from __future__ import annotations

import json
import random
import unicodedata
from pathlib import Path

import pytest
import regex
from tokenizers import Tokenizer

from fertility.corpus import sampling
from fertility.errors import CorpusError, FertilityError, FixError, TokenizerError
from fertility.fix import OUTPUTS as FIX_OUTPUTS
from fertility.fix import fix, heldout_documents
from fertility.fix import run as fix_module  # where _measure is looked up
from fertility.fix.config import FixConfig
from fertility.fix.text import fix_text
from fertility.outputs import MANIFEST, record
from tests.bpe import byte_level_bpe

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "corpus"


def lexicon(lang: str, n: int) -> list[str]:
    counts: dict[str, int] = {}
    for w in regex.findall(r"\w+", (EXAMPLES / f"{lang}.txt").read_text("utf-8")):
        counts[w] = counts.get(w, 0) + 1
    return sorted(counts, key=lambda w: (-counts[w], w))[:n]


def write_corpus(root: Path, lines: int = 150, words: int = 60, seed: int = 0) -> Path:
    """bn.txt and en.txt: `lines` sentences of 6-12 words each from a `words`-word lexicon."""
    rng = random.Random(seed)
    bn, en = lexicon("bn", words), lexicon("en", words)
    lengths = [rng.randint(6, 12) for _ in range(lines)]
    root.mkdir(parents=True, exist_ok=True)
    for name, lex, end in (("bn", bn, "।"), ("en", en, ".")):
        text = "\n".join(" ".join(rng.choice(lex) for _ in range(k)) + end for k in lengths)
        (root / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    return root


def train_bpe(lines: list[str], vocab_size: int, specials=("<|endoftext|>",)) -> Tokenizer:
    """The naive tokenizer: byte-level BPE with the GPT-2 pre-tokenizer."""
    return byte_level_bpe(lines, vocab_size, specials=specials)


def chars_per_token(tok: Tokenizer, texts: list[str]) -> float:
    return sum(map(len, texts)) / sum(len(e.ids) for e in tok.encode_batch(texts))


def read_heldout(folder: Path) -> dict[str, list[dict]]:
    return {
        p.stem: [json.loads(x) for x in p.read_text("utf-8").splitlines()]
        for p in sorted(folder.glob("*.jsonl"))
    }


@pytest.fixture(scope="module")
def trap(tmp_path_factory):
    """fix on the small corpus, and a naive tokenizer trained on the same training lines."""
    root = tmp_path_factory.mktemp("trap")
    corpus = write_corpus(root / "corpus")
    out = root / "fixed"
    result = fix([corpus], out, FixConfig(vocab_size=1000, heldout_fraction=0.2))
    held = read_heldout(out / "heldout")
    train = {}
    for lang in ("bn", "en"):
        texts = {r["text"] for r in held[lang]}
        train[lang] = [
            t for t in (corpus / f"{lang}.txt").read_text("utf-8").splitlines() if t not in texts
        ]
    naive = train_bpe(train["bn"] * 3 + train["en"], 1000)  # Bangla-weighted
    return {"corpus": corpus, "out": out, "result": result, "held": held, "naive": naive}


def test_walkthrough_claim_on_a_small_corpus(trap):
    fixed = Tokenizer.from_file(str(trap["out"] / "tokenizer.json"))
    bn = [r["text"] for r in trap["held"]["bn"]]
    en = [r["text"] for r in trap["held"]["en"]]
    assert len(bn) == len(en) == 30  # 20% of 150 lines each
    naive_bn, fixed_bn = chars_per_token(trap["naive"], bn), chars_per_token(fixed, bn)
    naive_en, fixed_en = chars_per_token(trap["naive"], en), chars_per_token(fixed, en)
    assert naive_bn < 1.6  # the trap: vowel signs cut off
    assert fixed_bn >= 2.5 * naive_bn
    assert abs(fixed_en / naive_en - 1) <= 0.05
    for text in bn + en:  # every held-out document round-trips
        assert fixed.decode(fixed.encode(text).ids) == text
    assert trap["result"].passed and trap["result"].gate.exit_code == 0


def test_fix_report_is_measured_on_heldout_only(trap):
    out, result = trap["out"], trap["result"]
    report = json.loads((out / "fix-report.json").read_text("utf-8"))
    assert report["schema"] == "fertility.fix/1"
    assert report["gate"]["passed"] is True
    assert (out / "report.html").read_text("utf-8").lstrip().lower().startswith("<!doctype")
    assert not list(out.glob(".*partial*")) and not list((out / "heldout").glob(".*"))
    # the measurement read the held-out documents and nothing else
    assert report["measurement"]["corpus"]["documents"] == 60
    fixed = Tokenizer.from_file(str(out / "tokenizer.json"))
    row = next(r for r in report["rows"] if r["group"] == "language" and r["key"] == "bn")
    bn = [r["text"] for r in trap["held"]["bn"]]
    # exact: one correctly rounded float64 division of the same integer counts, and JSON
    # keeps every bit of a float
    assert row["after"]["chars_per_token"] == chars_per_token(fixed, bn)
    assert row["after"]["roundtrip_failures"] == 0 and row["before"] is None
    # no held-out line was trained on: the split is the one heldout_documents() describes
    written = {(r["source"], r["line"]) for rows in trap["held"].values() for r in rows}
    assert written == set(heldout_documents([trap["corpus"]], 0.2, 0))
    # the balanced sampler: training characters counted here from the files, then p_bn by hand
    train_chars = {}
    for lang in ("bn", "en"):
        path = trap["corpus"] / f"{lang}.txt"
        lines = path.read_text("utf-8").splitlines()
        train_chars[lang] = sum(
            len(t) for i, t in enumerate(lines, 1) if (str(path), i) not in written
        )
    assert {k: v["train_chars"] for k, v in report["split"]["languages"].items()} == train_chars
    sampled = report["sampling"]["languages"]
    share_bn = train_chars["bn"] ** 0.3 / sum(c**0.3 for c in train_chars.values())
    assert sampled["bn"]["sampled_chars"] >= share_bn * report["sampling"]["budget_chars"]
    assert result.special_tokens == [
        {"token": "<|endoftext|>", "old_id": None, "new_id": 0, "kept": False}
    ]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("small") / "corpus", lines=60, words=40)


def old_tokenizer(path: Path, corpus: Path, vocab_size: int) -> Path:
    """GPT-2 style: two specials at ids 0 and 1, and one added after training (id = size)."""
    lines = [t for lang in ("bn", "en") for t in (corpus / f"{lang}.txt").read_text().split("\n")]
    tok = train_bpe(lines, vocab_size, specials=("<|endoftext|>", "<pad>"))
    tok.add_special_tokens(["<|im_end|>"])
    tok.save(str(path))
    return path


def test_special_token_ids_kept_from_old_tokenizer(small, tmp_path):
    old = old_tokenizer(tmp_path / "old.json", small, 300)
    before = Tokenizer.from_file(str(old))
    want = {t: before.token_to_id(t) for t in ("<|endoftext|>", "<pad>", "<|im_end|>")}
    assert want == {"<|endoftext|>": 0, "<pad>": 1, "<|im_end|>": before.get_vocab_size() - 1}
    fix(
        [small],
        tmp_path / "a",
        FixConfig(vocab_size=800, heldout_fraction=0.2),
        from_tokenizer=str(old),
    )
    new = Tokenizer.from_file(str(tmp_path / "a" / "tokenizer.json"))
    assert {t: new.token_to_id(t) for t in want} == want
    # the permuted ids change no tokenization: same tokens as a model trained without --from
    plain = fix(
        [small],
        tmp_path / "b",
        FixConfig(vocab_size=800, heldout_fraction=0.2, special_tokens=tuple(want)),
    )
    ref = Tokenizer.from_file(plain.paths["tokenizer"])
    text = (small / "bn.txt").read_text("utf-8")
    assert new.encode(text).tokens == ref.encode(text).tokens
    assert ref.token_to_id("<|im_end|>") == 2  # no --from: added first, in order


def test_special_token_that_cannot_keep_its_id_is_reported(small, tmp_path):
    old = old_tokenizer(tmp_path / "old.json", small, 600)
    old_id = Tokenizer.from_file(str(old)).token_to_id("<|im_end|>")
    assert old_id >= 400  # the small corpus stops the trainer before 600
    r = fix(
        [small],
        tmp_path / "out",
        FixConfig(vocab_size=400, heldout_fraction=0.2),
        from_tokenizer=str(old),
    )
    by = {s["token"]: s for s in r.special_tokens}
    assert by["<|endoftext|>"]["kept"] and by["<pad>"]["kept"]
    assert by["<|im_end|>"]["old_id"] == old_id and not by["<|im_end|>"]["kept"]
    new = Tokenizer.from_file(r.paths["tokenizer"])
    assert new.token_to_id("<|im_end|>") == by["<|im_end|>"]["new_id"] < 400
    assert f"id {old_id} -> " in fix_text(r)
    # the old tokenizer is measured beside the new one, and the changes are listed
    assert all(row["before"] is not None for row in r.rows)
    assert r.changes["pattern"] == ["gpt2", "mark_aware"]


def test_sentencepiece_backend_keeps_low_ids_and_round_trips(small, tmp_path):
    old = old_tokenizer(tmp_path / "old.json", small, 300)
    r = fix(
        [small],
        tmp_path / "sp",
        FixConfig(vocab_size=600, backend="sentencepiece", model="unigram", heldout_fraction=0.2),
        from_tokenizer=str(old),
    )
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=r.paths["model"])
    assert sp.piece_to_id("<|endoftext|>") == 0 and sp.piece_to_id("<pad>") == 1
    assert r.settings["pattern"] is None  # SentencePiece splits without the regex
    assert not (tmp_path / "sp" / "tokenizer.json").exists()
    for rows in read_heldout(tmp_path / "sp" / "heldout").values():
        for rec in rows:
            assert sp.decode(sp.encode(rec["text"])) == rec["text"]


def test_unigram_byte_fallback_and_lossless_by_default(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", lines=60, words=40)
    # decomposed (NFD) text: no normaliser by default, so it comes back as written
    lines = (corpus / "en.txt").read_text("utf-8").splitlines()
    lines = [unicodedata.normalize("NFD", "Café crème " + x) for x in lines]
    (corpus / "en.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = fix(
        [corpus],
        tmp_path / "out",
        FixConfig(vocab_size=700, model="unigram", heldout_fraction=0.5, seed=3),
    )
    tok = Tokenizer.from_file(r.paths["tokenizer"])
    assert r.tokenizer["vocab_size"] <= 700
    unseen = "Ωμέγα 🙂 ক্ষ"  # characters the training text never had
    enc = tok.encode(unseen)
    assert tok.token_to_id("<unk>") not in enc.ids and tok.decode(enc.ids) == unseen
    held = [rec for rows in read_heldout(tmp_path / "out" / "heldout").values() for rec in rows]
    assert sum(unicodedata.normalize("NFC", x["text"]) != x["text"] for x in held) == 30
    assert all(tok.decode(tok.encode(x["text"]).ids) == x["text"] for x in held)
    assert all(row["after"]["roundtrip_failures"] == 0 for row in r.rows)
    assert r.normalizer_preview is None


def as_typed(text: str) -> str:
    """Bengali as people type it: য় ড় ঢ় as the one code points U+09DF U+09DC U+09DD, and, in
    every third line, ো as U+09C7 U+09BE (two keys, as in chat text)."""
    out = []
    for i, line in enumerate(text.split("\n")):
        for pair, one in (
            ("\u09af\u09bc", "\u09df"),
            ("\u09a1\u09bc", "\u09dc"),
            ("\u09a2\u09bc", "\u09dd"),
        ):
            line = line.replace(pair, one)
        out.append(line.replace("\u09cb", "\u09c7\u09be") if i % 3 == 0 else line)
    return "\n".join(out)


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """The small corpus with Bengali as typed, fixed with no normaliser and with --nfc."""
    root = tmp_path_factory.mktemp("typed")
    corpus = write_corpus(root / "corpus", lines=100, words=60)
    bn = corpus / "bn.txt"
    bn.write_text(as_typed(bn.read_text("utf-8")), encoding="utf-8")
    # single lines: the sentences are drawn independently (no neighbour shares a topic), and
    # this test is about the round trip, not about which 30 lines are held out
    cfg = dict(vocab_size=1000, heldout_fraction=0.3, heldout_block=1)
    runs = {
        name: fix([corpus], root / name, FixConfig(**cfg, normalization=name))
        for name in ("none", "nfc")
    }
    held = {r["line"] for r in read_heldout(root / "none" / "heldout")["bn"]}
    lines = bn.read_text("utf-8").splitlines()
    return {
        "root": root,
        "runs": runs,
        "held": [t for i, t in enumerate(lines, 1) if i in held],
        "train": [t for i, t in enumerate(lines, 1) if i not in held],
    }


def test_default_fix_gives_back_bengali_as_typed(typed):
    r = typed["runs"]["none"]
    tok = Tokenizer.from_file(r.paths["tokenizer"])
    held = typed["held"]
    assert sum("\u09df" in t for t in held) >= 10  # the test has the letter to lose
    for rows in read_heldout(typed["root"] / "none" / "heldout").values():
        for rec in rows:
            assert tok.decode(tok.encode(rec["text"]).ids) == rec["text"]
    assert r.roundtrip["bn"] == {
        "checked": len(held),
        "failures": 0,
        "normalizer_changed": 0,
        "changes": [],
    }  # every held-out document is checked
    assert tok.normalizer is None and r.settings["normalization"] == "none"
    assert r.normalizer_preview is None and "round trip bn" not in fix_text(r)
    assert r.passed  # so the NFC run below fails on its round trip alone


def test_nfc_preview_counts_what_it_changes_and_is_not_a_pass(typed):
    r = typed["runs"]["nfc"]
    train = typed["train"]  # the Bengali training lines (English is ASCII)
    by = {row["from"]: row for row in r.normalizer_preview["changes"]}
    yya = by["U+09DF"]
    nfc = unicodedata.normalize("NFC", "\u09df")
    assert yya["to"] == " ".join(f"U+{ord(c):04X}" for c in nfc) == "U+09AF U+09BC"
    assert yya["occurrences"] == sum(t.count("\u09df") for t in train)  # hand counts
    assert yya["documents"] == sum("\u09df" in t for t in train)
    assert yya["name"] == "BENGALI LETTER YYA" and yya["change"] == "decomposed"
    oo = by["U+09C7 U+09BE"]
    assert oo["to"] == "U+09CB"
    assert oo["occurrences"] == sum(t.count("\u09c7\u09be") for t in train)
    en = (typed["root"] / "corpus" / "en.txt").read_text("utf-8").splitlines()
    held_en = read_heldout(typed["root"] / "nfc" / "heldout")["en"]
    assert r.normalizer_preview["documents"] == len(train) + len(en) - len(held_en)
    changed = sum(unicodedata.normalize("NFC", t) != t for t in train)
    assert r.normalizer_preview["changed_documents"] == changed
    # held out: the tokenizer gives back NFC text, so exactly the documents NFC changes fail
    lossy = sum(unicodedata.normalize("NFC", t) != t for t in typed["held"])
    assert lossy > 0 and r.roundtrip["bn"]["failures"] == lossy
    assert r.roundtrip["bn"]["normalizer_changed"] == lossy
    text = fix_text(r)
    assert (
        f"NFC decomposed U+09DF BENGALI LETTER YYA into U+09AF U+09BC: "
        f"{yya['occurrences']:,} times in {yya['documents']:,} documents" in text
    )
    assert f"round trip bn: {lossy} of {len(typed['held'])} held-out documents" in text
    report = json.loads(Path(r.paths["fix_report"]).read_text("utf-8"))
    assert report["normalizer_preview"]["changes"][0] == r.normalizer_preview["changes"][0]
    # the gate's round-trip check: a lossy tokenizer fails unless the policy allows it
    assert not r.passed and "gate: FAIL" in text and "gate: PASS" not in text


def test_interrupted_run_leaves_no_half_written_tokenizer(small, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    record(out, list(FIX_OUTPUTS), made_by="fix")  # an earlier run's folder
    (out / "tokenizer.json").write_text("earlier run", encoding="utf-8")
    real = sampling.training_stream

    def interrupted(*args, **kw):
        stream = real(*args, **kw)
        yield next(stream)
        raise KeyboardInterrupt

    monkeypatch.setattr(sampling, "training_stream", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fix([small], out, FixConfig(vocab_size=500, heldout_fraction=0.2))
    assert (out / "tokenizer.json").read_text("utf-8") == "earlier run"
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == [MANIFEST, "tokenizer.json"]


def test_run_interrupted_after_training_leaves_no_stale_report(small, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    record(out, list(FIX_OUTPUTS), made_by="fix")  # an earlier run's folder
    (out / "fix-report.json").write_text("earlier run", encoding="utf-8")
    (out / "report.html").write_text("earlier run", encoding="utf-8")

    def interrupted(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(fix_module, "_measure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fix([small], out, FixConfig(vocab_size=500, heldout_fraction=0.2))
    # the new tokenizer is in place; no report of the one it replaced sits beside it
    assert Tokenizer.from_file(str(out / "tokenizer.json")).get_vocab_size() > 256
    assert not (out / "fix-report.json").exists() and not (out / "report.html").exists()


def test_same_seed_same_tokenizer(small, tmp_path, monkeypatch):
    cfg = FixConfig(vocab_size=500, heldout_fraction=0.2, seed=7)
    a = fix([small], tmp_path / "a", cfg)
    monkeypatch.setattr(sampling, "KEEP_CHARS", 0)  # a big corpus: read twice, not kept
    b = fix([small], tmp_path / "b", cfg)
    assert a.tokenizer["fingerprint"] == b.tokenizer["fingerprint"]
    assert read_heldout(tmp_path / "a" / "heldout") == read_heldout(tmp_path / "b" / "heldout")
    fix([small], tmp_path / "c", FixConfig(vocab_size=500, heldout_fraction=0.2, seed=8))
    assert read_heldout(tmp_path / "a" / "heldout") != read_heldout(tmp_path / "c" / "heldout")


@pytest.mark.parametrize(
    "case", ["empty", "vocab", "from-garbage", "from-missing", "heldout", "one-doc"]
)
def test_bad_input_is_one_line(case, small, tmp_path):
    corpus, cfg, frm = [small], FixConfig(vocab_size=500), None
    expected: type[FertilityError] = FixError
    if case == "empty":
        (tmp_path / "empty.txt").write_text("\n  \n\n", encoding="utf-8")
        corpus, expected = [tmp_path / "empty.txt"], CorpusError
    elif case == "vocab":
        cfg = FixConfig(vocab_size=256)  # 256 bytes + <|endoftext|> do not fit
    elif case == "from-garbage":
        (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
        frm, expected = str(tmp_path / "bad.json"), TokenizerError
    elif case == "from-missing":
        frm, expected = str(tmp_path / "nope.json"), TokenizerError
    elif case == "heldout":
        cfg = FixConfig(vocab_size=500, heldout_fraction=0.0)
    elif case == "one-doc":
        (tmp_path / "one.txt").write_text("একটি মাত্র লাইন\n", encoding="utf-8")
        corpus = [tmp_path / "one.txt"]
    with pytest.raises(expected) as err:
        fix(corpus, tmp_path / "out", cfg, from_tokenizer=frm)
    assert "\n" not in str(err.value) and str(err.value)
    assert not (tmp_path / "out" / "tokenizer.json").exists()


def test_lossy_tokenizer_the_policy_allows_is_not_a_plain_pass(typed, tmp_path):
    policy = tmp_path / "lossy.toml"
    policy.write_text("allow_lossy = true\n", encoding="utf-8")
    r = fix(
        [typed["root"] / "corpus"],
        tmp_path / "out",
        FixConfig(vocab_size=1000, heldout_fraction=0.3, normalization="nfc", heldout_block=1),
        policy=policy,
    )
    lossy = sum(unicodedata.normalize("NFC", t) != t for t in typed["held"])
    assert r.passed and lossy > 0
    held = 2 * len(typed["held"])  # as many English lines held out as Bengali
    assert (
        f"gate: PASS, LOSSY ({lossy} of {held} held-out documents do not round-trip)" in fix_text(r)
    )


def test_command_normaliser_options(small, tmp_path, run):
    fingerprints = {}
    for flag in ("", "--no-normalize", "--nfc"):  # --no-normalize: the default, still accepted
        out = tmp_path / (flag or "default")
        code, stdout, _ = run(
            "fix",
            small,
            "--vocab-size",
            400,
            "--out",
            out,
            "--heldout",
            0.2,
            *([flag] if flag else []),
            "--quiet",
        )
        assert code in (0, 1) and "gate: " in stdout
        fingerprints[flag] = json.loads((out / "fix-report.json").read_text("utf-8"))["tokenizer"][
            "fingerprint"
        ]
        normalizer = Tokenizer.from_file(str(out / "tokenizer.json")).normalizer
        assert (normalizer is None) == (flag != "--nfc")
    assert fingerprints[""] == fingerprints["--no-normalize"] != fingerprints["--nfc"]


def test_command_exit_codes_and_nfkc(small, tmp_path, run):
    # bad input: one line on stderr, exit 2, nothing written
    code, _, err = run("fix", small, "--vocab-size", 100, "--out", tmp_path / "bad")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "bad" / "tokenizer.json").exists()
    # a gate the new tokenizer cannot pass (Bengali floor of 50 chars per token): exit 1, and
    # every file is written all the same
    policy = tmp_path / "strict.toml"
    policy.write_text("[floors.language]\nbn = 50.0\n", encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, _ = run(
        "fix",
        small,
        "--vocab-size",
        500,
        "--out",
        out,
        "--heldout",
        0.2,
        "--nfkc",
        "--policy",
        policy,
        "--quiet",
    )
    assert code == 1 and "gate: FAIL" in stdout
    report = json.loads((out / "fix-report.json").read_text("utf-8"))
    assert report["gate"]["passed"] is False and (out / "report.html").exists()
    # --nfkc: the ligature U+FB01 and the superscript two fold to "fi" and "2"
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    assert tok.normalizer.normalize_str("\ufb01x\u00b2") == "fix2"
    assert report["settings"]["normalization"] == "nfkc"
