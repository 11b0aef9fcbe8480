"""`fertility fix` on real text (ROOT/text, and the committed Bengali excerpt when there is
one), each expected value from a second method:
- by default every held-out document comes back as written, the ones with U+09DF (য়, as
  keyboards type it) included; with --nfc fix says what NFC changes, by the same counts
  Python's unicodedata gives, and the gate does not pass the lossy tokenizer;
- the held-out documents share no near-duplicate with the training documents: the documents
  dropped are those Python sets of word runs find, in 13 languages;
- the held-out figure agrees with text neither tokenizer saw, once o200k (trained on neither)
  says how much harder that text is;
- a language made worse than --from by more than fix's WORSE_SHARE gets its warning, with
  the temperature's direction;
- a ByteLevel tokenizer with add_prefix_space loses its round trip to the prefix space, and
  the finding names that cause and its own fix.

Kept fast: slices of the files, small vocabularies.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tokenizers import Tokenizer

from fertility.corpus import neardup
from fertility.findings import diagnose
from fertility.fix import WORSE_SHARE, fix
from fertility.fix.config import FixConfig
from fertility.fix.text import fix_text
from fertility.measure import analyze
from fertility.tokenizers.patterns import FAMILIES

pytestmark = pytest.mark.realworld

DOCS = 1200
YYA = "\u09df"
EXCERPT = Path(__file__).resolve().parent / "excerpt" / "bn.txt"
SOURCES = ["rw"] + (["excerpt"] if EXCERPT.is_file() else [])
LANGS = ("ar", "bn", "el", "en", "he", "hi", "ja", "ko", "ru", "ta", "te", "th", "zh")


def lines_of(path: Path, n: int | None = None) -> list[str]:
    return [t for t in path.read_text("utf-8").splitlines() if t.strip()][:n]


def o200k(rw: Path) -> tiktoken.Encoding:
    """o200k from the fixture's rank file, encoded by tiktoken itself."""
    return tiktoken.Encoding(
        "o200k_base",
        pat_str=FAMILIES["o200k"],
        mergeable_ranks=load_tiktoken_bpe(str(rw / "tokenizers" / "o200k_base.tiktoken")),
        special_tokens={},
    )


# ---------------------------------------------------------------- near-duplicates, by sets

_UNSPACED = {"CJK", "IDEOGRAPHIC", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR"}


def ref_shingles(text: str) -> set[str]:
    """The shingles of neardup's docstring, as strings: unicodedata's categories for the
    letters and marks, the first word of each character's name for its script."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = " ".join("".join(c if unicodedata.category(c)[0] in "LM" else " " for c in t).split())
    letters = t.replace(" ", "")
    if not letters:
        return set()
    unspaced = sum(unicodedata.name(c, "").split(" ")[0] in _UNSPACED for c in letters)
    units, k, sep = (
        (list(letters), neardup.CHARS, "")
        if 2 * unspaced > len(letters)
        else (
            t.split(),
            neardup.WORDS,
            " ",
        )
    )
    if len(units) < k:
        return {sep.join(units)}
    return {sep.join(units[i : i + k]) for i in range(len(units) - k + 1)}


def ref_shared(held: list[str], train: list[str]) -> list[bool]:
    seen = set().union(*map(ref_shingles, held))
    return [bool(ref_shingles(t) & seen) for t in train]


def test_near_duplicates_are_the_documents_sets_of_word_runs_find(rw):
    found = 0
    for lang in LANGS:
        lines = lines_of(rw / "text" / f"{lang}.txt", 1500)
        held, train = lines[::10], [t for i, t in enumerate(lines) if i % 10]
        index = neardup.HeldoutShingles()
        for t in held:
            index.add(t)
        got = index.freeze().shared(train).tolist()
        assert got == ref_shared(held, train), lang
        found += sum(got)
    assert found > 100  # real UI text repeats itself: there is something to find


# ---------------------------------------------------------------- fix on real Bengali


@pytest.fixture(scope="module", params=SOURCES)
def bengali(request, tmp_path_factory) -> dict:
    """bn.txt (its first DOCS non-empty lines) fixed with no normaliser and with --nfc; from
    the fixture folder also with English beside it and o200k as --from."""
    rw = request.getfixturevalue("rw") if request.param == "rw" else None
    lines = lines_of(rw / "text" / "bn.txt" if rw else EXCERPT, DOCS)
    root = tmp_path_factory.mktemp(f"fix-{request.param}")
    for folder in ("corpus", "mixed"):
        (root / folder).mkdir()
        (root / folder / "bn.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = dict(vocab_size=2000, heldout_fraction=0.2)
    runs = {"nfc": fix([root / "corpus"], root / "nfc", FixConfig(**cfg, normalization="nfc"))}
    if rw is None:
        runs["none"] = fix([root / "corpus"], root / "none", FixConfig(**cfg))
    else:
        en = lines_of(rw / "text" / "en.txt", DOCS)
        (root / "mixed" / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
        spec = f"o200k={rw / 'tokenizers' / 'o200k_base.tiktoken'}"
        runs["none"] = fix([root / "mixed"], root / "none", FixConfig(**cfg), from_tokenizer=spec)
    return {"runs": runs, "rw": rw, **{name: bengali_split(root / name, lines) for name in runs}}


def bengali_split(out: Path, lines: list[str]) -> dict:
    """The held-out Bengali lines of a run, and its training lines as Python sets of word
    runs leave them: those sharing one with any held-out document (English ones too: a UI
    string such as "PID" is in both files) are dropped."""
    held_lines = {rec["line"] for rec in heldout(out, "bn")}
    held = [t for i, t in enumerate(lines, 1) if i in held_lines]
    rest = [t for i, t in enumerate(lines, 1) if i not in held_lines]
    every = [rec["text"] for f in sorted((out / "heldout").glob("*.jsonl")) for rec in read(f)]
    shared = ref_shared(every, rest)
    return {
        "held": held,
        "train": [t for t, s in zip(rest, shared) if not s],
        "dropped": sum(shared),
    }


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines()]


def heldout(out: Path, lang: str) -> list[dict]:
    return read(out / "heldout" / f"{lang}.jsonl")


def test_default_fix_round_trips_every_heldout_bengali_document(bengali):
    held, r = bengali["none"]["held"], bengali["runs"]["none"]
    assert sum(YYA in t for t in held) > 0, "no held-out line has U+09DF: nothing to prove"
    tok = Tokenizer.from_file(r.paths["tokenizer"])
    lost = [t for t in held if tok.decode(tok.encode(t).ids) != t]
    assert lost == []
    assert r.roundtrip["bn"]["checked"] == len(held) and r.roundtrip["bn"]["failures"] == 0


def test_training_documents_with_a_heldout_near_duplicate_are_dropped(bengali):
    for name, r in bengali["runs"].items():
        bn, want = r.split["languages"]["bn"], bengali[name]
        assert bn["dropped_near_duplicates"] == want["dropped"]
        assert bn["train_documents"] == len(want["train"])
        assert bn["train_chars"] == sum(map(len, want["train"]))
    text = fix_text(bengali["runs"]["none"])
    assert (
        f"{bengali['runs']['none'].split['dropped_near_duplicates']:,} training documents" in text
    )


def test_nfc_names_what_it_changes_and_does_not_pass(bengali):
    train, held, r = bengali["nfc"]["train"], bengali["nfc"]["held"], bengali["runs"]["nfc"]
    yya = next(c for c in r.normalizer_preview["changes"] if c["from"] == "U+09DF")
    assert yya["occurrences"] == sum(t.count(YYA) for t in train)
    assert yya["documents"] == sum(YYA in t for t in train)
    assert r.normalizer_preview["changed_documents"] == sum(
        unicodedata.normalize("NFC", t) != t for t in train
    )
    lossy = sum(unicodedata.normalize("NFC", t) != t for t in held)
    assert r.roundtrip["bn"]["failures"] == lossy > 0
    text = fix_text(r)
    assert "NFC decomposed U+09DF BENGALI LETTER YYA" in text
    assert f"round trip bn: {lossy} of {len(held)}" in text
    assert not r.passed and r.gate.exit_code == 1


def test_a_language_made_worse_than_from_is_a_warning_with_the_temperature(bengali):
    rw, r = bengali["rw"], bengali["runs"]["none"]
    if rw is None:
        pytest.skip("the committed excerpt has no English beside it and no --from")
    enc, tok = o200k(rw), Tokenizer.from_file(r.paths["tokenizer"])
    ratio = {}
    for lang in ("bn", "en"):
        texts = [rec["text"] for rec in heldout(Path(r.paths["heldout"]).parent, lang)]
        old = sum(len(enc.encode_ordinary(t)) for t in texts)
        new = sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
        ratio[lang] = old / new  # (chars / new) / (chars / old)
    worse = [t["lang"] for t in r.tradeoffs]
    assert worse == [x for x in ("bn", "en") if ratio[x] < 1 - WORSE_SHARE] and "en" in worse
    en = r.tradeoffs[worse.index("en")]
    # tokens counted by tiktoken and tokenizers, characters by len: the same integers fix
    # divides, so the ratio agrees to a few float64 roundings
    assert en["ratio"] == pytest.approx(ratio["en"], rel=1e-12)
    # p_g = n_g**0.3 / sum n**0.3 over the training characters, by hand
    n = {x: r.split["languages"][x]["train_chars"] for x in ("bn", "en")}
    assert en["share"] == pytest.approx(n["en"] ** 0.3 / sum(v**0.3 for v in n.values()))
    assert en["share_at_1"] == pytest.approx(n["en"] / sum(n.values()))
    assert en["raise_gives_more"] == (n["en"] > n["bn"])  # two languages: the larger gains
    line = next(x for x in fix_text(r).splitlines() if x.startswith("warning: en"))
    assert "--temperature" in line and f"{1 - en['ratio']:.0%} worse" in line
    report = json.loads(Path(r.paths["fix_report"]).read_text("utf-8"))
    assert report["tradeoffs"]["worse_share"] == WORSE_SHARE
    assert [t["lang"] for t in report["tradeoffs"]["languages"]] == worse


# ---------------------------------------------------------------- the held-out figure is honest


def test_heldout_figure_agrees_with_text_neither_tokenizer_saw(rw, tmp_path):
    """Runs of 300 lines out of every 1200 of bn.txt are kept from fix altogether (the
    unseen text, spread over the file so that it is like the rest of it); fix trains on the
    others and measures its held-out documents. The new tokenizer's chars/token on its
    held-out documents, divided by o200k's there, must match the same quotient on the unseen
    text: o200k, trained on neither, cancels how much harder the unseen text is.

    The quotient minus one is the held-out figure's optimism. Measured at seeds 0, 1, 2:
    -4.3%, -3.5%, -1.3% with runs of 100 lines (the default), +5.5%, +1.9%, +3.3% with
    single lines held out (`heldout_block=1`, the old split). The two sides are samples of
    a few thousand lines, so the quotient moves by a few percent from seed to seed; the test
    allows 3% of optimism, which seed 0 of single lines exceeds, and 8% of pessimism (a
    held-out figure below the truth passes nothing it should not).
    """
    lines = (rw / "text" / "bn.txt").read_text("utf-8").splitlines()
    unseen = [t for i, t in enumerate(lines) if i % 1200 < 300 and t.strip()]
    (tmp_path / "c").mkdir()
    kept = ["" if i % 1200 < 300 else t for i, t in enumerate(lines)]  # line numbers kept
    (tmp_path / "c" / "bn.txt").write_text("\n".join(kept) + "\n", encoding="utf-8")
    cfg = FixConfig(vocab_size=4000, heldout_fraction=0.3, heldout_max_docs=3000)
    r = fix([tmp_path / "c"], tmp_path / "out", cfg)
    tok, enc = Tokenizer.from_file(r.paths["tokenizer"]), o200k(rw)
    held = [rec["text"] for rec in heldout(tmp_path / "out", "bn")]

    def new(texts):
        return sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))

    def old(texts):
        return sum(len(enc.encode_ordinary(t)) for t in texts)

    row = next(x for x in r.rows if x["group"] == "language" and x["key"] == "bn")
    assert row["after"]["chars_per_token"] == sum(map(len, held)) / new(held)
    agreement = (old(held) / new(held)) / (old(unseen) / new(unseen))
    assert 0.92 < agreement < 1.03, agreement


# ---------------------------------------------------------------- round-trip causes


def test_a_prefix_space_is_its_own_round_trip_cause_with_its_own_fix(rw, tmp_path):
    """GPT-2's tokenizer with ByteLevel(add_prefix_space=true), as GPT-2 and RoBERTa are
    often loaded: decode gives " " + text. The `tokenizers` library says which documents."""
    obj = json.loads((rw / "tokenizers" / "bpe-gpt2" / "tokenizer.json").read_text("utf-8"))
    obj["pre_tokenizer"] = {
        "type": "ByteLevel",
        "add_prefix_space": True,
        "trim_offsets": True,
        "use_regex": True,
    }
    (tmp_path / "tok.json").write_text(json.dumps(obj), encoding="utf-8")
    (tmp_path / "c").mkdir()
    text = lines_of(rw / "text" / "en.txt", 300)
    (tmp_path / "c" / "en.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    ref = Tokenizer.from_str(json.dumps(obj))
    decoded = [ref.decode(ref.encode(t).ids) for t in text]
    failing = sum(d != t for d, t in zip(decoded, text))
    assert failing > 0 and all(d == " " + t for d, t in zip(decoded, text) if d != t)
    rep = analyze([tmp_path / "c"], [f"gpt2={tmp_path / 'tok.json'}"], detail_docs=None)
    assert rep.roundtrip[("gpt2", "en")]["causes"] == {"prefix_space": failing}
    (f,) = [x for x in diagnose(rep) if x.rule == "roundtrip"]
    assert f.evidence["causes"] == {"prefix_space": failing}
    assert "puts a space in front of the text" in f.cause and "spaces are added" not in f.cause
    assert "add_prefix_space=false" in f.fix and "lowercas" not in f.fix
