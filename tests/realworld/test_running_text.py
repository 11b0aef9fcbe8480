"""Verdicts from a script's running text, and tokens in the script of what they encode
(docs/GATE.md "Running text", docs/METRICS.md "Which script a token belongs to"), on the
real-world fixtures. Expected values come from plain per-character loops over `regex`'s
Unicode properties and from the tokenizers' own libraries, not from the code under test.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tempfile
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
import regex
from tokenizers import Regex, Tokenizer, pre_tokenizers

from fertility import unicode as U
from fertility.gate import evaluate
from fertility.measure import analyze
from fertility.policy import default_policy
from fertility.tokenizers.patterns import FAMILIES
from fertility.unicode.running import CJK, RUN_LETTERS, RUN_WORDS
from tests.bpe import byte_level_bpe
from tests.measure.test_batch_groups import splitmix
from tests.unicode.test_unicode import _reference_scripts

pytestmark = pytest.mark.realworld

LANGS = ("en", "ru", "el", "ar", "he", "hi", "bn", "ta", "te", "th", "ja", "zh", "ko")
O200K = "tokenizers/o200k_base.tiktoken"
LLAMA3 = "tokenizers/llama3/tokenizer.model#llama3"
BREAK = set("#%&*@/\\{}[]<>|~^`_=$+")
OWN = regex.compile(r"[^\p{Script=Common}\p{Script=Inherited}\p{Script=Unknown}]")


def _lines(rw: Path, rel: str, n: int) -> list[str]:
    return [x for x in (rw / rel).read_text(encoding="utf-8").splitlines() if x][:n]


@functools.cache
def _family(ch: str) -> str | None:
    """A letter's script family by `regex` (None: Common, Inherited, Unknown)."""
    if not OWN.match(ch):
        return None
    name = next(s for s in U.SCRIPTS[4:] if regex.match(rf"\p{{sc={s}}}", ch))
    return "Hani" if name in CJK else name


def _breaker(ch: str) -> bool:
    return ch in BREAK or unicodedata.category(ch) in ("Sm", "Sc", "Sk", "Pc")


def reference_running(text: str) -> list[bool]:
    """The rule of docs/GATE.md, one word at a time: which letters are running text."""
    words = []  # [family, letter positions, clean]; None: a breaker token between words
    for m in regex.finditer(r"\S+", text):
        bad = any(_breaker(c) for c in m.group())
        parts: list[list] = []
        for i, c in enumerate(m.group(), m.start()):
            fam = _family(c)
            if fam is None:
                continue
            if parts and parts[-1][0] == fam:
                parts[-1][1].append(i)
            else:
                parts.append([fam, [i]])
        if bad:
            words.append(None)
        words += [[fam, pos, not bad] for fam, pos in parts]
    clean = Counter(w[0] for w in words if w and w[2])
    top = clean.most_common(2)
    dominant = top[0][0] if top and (len(top) == 1 or top[0][1] > top[1][1]) else None
    out = [False] * len(text)
    run: list = []

    def close():
        if run:
            fam, n = run[0][0], sum(len(w[1]) for w in run)
            nospace = fam in U.NO_SPACE_SCRIPTS or fam == "Hani"
            ok = (n >= RUN_LETTERS) if nospace else (len(run) >= RUN_WORDS)
            for w in run:
                for i in w[1]:
                    out[i] = ok or fam == dominant
        run.clear()

    for w in words:
        if w is None or not w[2] or (run and run[0][0] != w[0]):
            close()
        if w is not None and w[2]:
            run.append(w)
    close()
    return out


def test_running_text_matches_a_plain_loop_on_real_text(rw):
    texts = [t for lang in LANGS for t in _lines(rw, f"text/{lang}.txt", 150)]
    texts += _lines(rw, "shipped/bn.txt", 600)
    tb = U.analyze_texts(texts)
    got = tb.running.tolist()
    for i, text in enumerate(texts):
        a, want = int(tb.doc_offsets[i]), reference_running(text)
        letters = [j for j, c in enumerate(text) if _family(c)]
        assert [got[a + j] for j in letters] == [want[j] for j in letters], text
        # a non-letter takes the flag of the letter whose script it takes: the previous one
        # in its document, else the next (fertility.unicode.batch._resolve); none: False
        for j in (j for j, c in enumerate(text) if not _family(c)):
            before = [x for x in letters if x < j]
            after = [x for x in letters if x > j]
            of = before[-1] if before else after[0] if after else None
            assert got[a + j] == (of is not None and want[of]), (text, j)


def test_o200k_passes_a_real_bengali_file_whose_latin_is_placeholders(rw):
    path = rw / "shipped" / "bn.txt"
    text = path.read_text(encoding="utf-8")
    latin = sum(1 for c in text if _family(c) == "Latn")
    running = 0
    for x in text.splitlines():
        latn = [j for j, c in enumerate(x) if _family(c) == "Latn"]
        if latn:  # the reference once a line (it was run again for each Latin letter)
            ref = reference_running(x)
            running += sum(ref[j] for j in latn)
    # the Latin letters are many (placeholders, markup), their running text is not
    assert latin / len(text) > 0.05 and running / len(text) < 0.005
    rep = analyze([str(path)], [str(rw / O200K)], workers=1)
    res = evaluate(rep, default_policy())
    assert res.passed, [c.describe() for c in res.checks if c.verdict != "pass"]
    assert {(c.key, c.verdict) for c in res.checks if c.group == "script"} == {("Beng", "pass")}
    (skip,) = res.skipped
    assert skip["key"] == "Latn" and skip["running_share"] < 0.01 < skip["share"]
    assert "reported, not judged" in skip["reason"] and "%" in skip["reason"]
    assert all(f.severity == "info" for f in res.findings if f.key == "Latn")


def _mixture(rw: Path, copies: int, tmp: Path) -> Path:
    """Real Bengali and English with 0.04% of the characters in Russian lines."""
    bn, en = _lines(rw, "text/bn.txt", 3000), _lines(rw, "text/en.txt", 3000)
    body = "\n".join(bn + en) + "\n"
    ru, need, extra = iter(_lines(rw, "text/ru.txt", 500)), 0.0004 * len(body), ""
    while len(extra) < need:
        extra += next(ru) + "\n"
    path = tmp / f"mix{copies}" / "mix.txt"
    path.parent.mkdir()
    path.write_text((body + extra) * copies, encoding="utf-8")
    return path


def test_the_verdict_does_not_change_with_corpus_size(rw, tmp_path):
    """A sound tokenizer for Bengali and English (a mark-aware byte-level BPE trained here on
    them): the 0.04% of Russian draws byte-fallback, balance and merge findings that a strict
    CI policy (warnings fail) would block on, at some corpus sizes and not others. Reported,
    not judged, the verdict is the same at 1x and 10x."""
    lines = _lines(rw, "text/bn.txt", 3000) + _lines(rw, "text/en.txt", 3000)
    split = pre_tokenizers.Split(Regex(FAMILIES["mark_aware"]), "isolated")
    tok = tmp_path / "bn-en" / "tokenizer.json"
    byte_level_bpe(lines, 4000, pre_tokenizer=_byte_level(split), path=tok)
    strict = dataclasses.replace(default_policy(), fail_on=("error", "warning"))
    got = {}
    for copies in (1, 10):
        res = evaluate(
            analyze([str(_mixture(rw, copies, tmp_path))], [str(tok)], workers=1), strict
        )
        cyrl = [f for f in res.findings if f.key == "Cyrl"]
        assert cyrl and all(f.severity == "info" and "not_judged" in f.evidence for f in cyrl)
        assert [s["key"] for s in res.skipped] == ["Cyrl"]
        checks = sorted((c.name, c.key, c.verdict) for c in res.checks)
        got[copies] = (res.passed, checks, sorted((f.rule, f.key) for f in res.blocking))
        assert not any(key == "Cyrl" for _, key, _ in checks)
    assert got[1] == got[10]


def _byte_level(split):
    return pre_tokenizers.Sequence(
        [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )


def test_no_latin_row_collects_non_latin_byte_pieces(rw):
    # Tamil messages with Latin names and terms inside
    rep = _analyze_texts(_lines(rw, "text/ta.txt", 2500), f"{rw}/{LLAMA3}")
    for (_, script), chars in rep.byte_fallback_chars.items():
        for ch in chars:  # the code points the script's byte pieces hold, as characters
            assert _family(ch) in (None, script), (script, ch)
    f = rep.frame
    latn = f[(f.group == "script") & (f.key == "Latn")].iloc[0]
    assert latn.byte_fallback_rate < 0.005  # 2.7% before: Tamil pieces after a Latin word


def test_tokens_per_script_agree_with_the_library_offsets(rw):
    """Each token of tokenizers' own encoding, with its own offsets, goes to the script of the
    characters it encodes: a byte piece to its character, else the first character with a
    script of its own, else where it starts; a token with letters of several scripts
    (Japanese kanji and kana) to one of them, drawn with probability its share of them by a
    hash of (start, id, document length): splitmix64 written here in Python integers."""
    texts = [t for t in _lines(rw, "text/ta.txt", 3000) if regex.search(r"\p{Latin}", t)][:400]
    texts += [t for t in _lines(rw, "text/ja.txt", 3000) if regex.search(r"\p{Latin}", t)][:200]
    texts += _lines(rw, "text/ja.txt", 600)  # kanji and kana in one token: drawn
    path = rw / "tokenizers" / "bpe-o200k" / "tokenizer.json"
    rep = _analyze_texts(texts, path)  # first: the reference reads its script table
    tok = Tokenizer.from_file(str(path))
    want: Counter = Counter()
    drawn = 0
    for text, enc in zip(texts, tok.encode_batch(texts, add_special_tokens=False)):
        resolved = _reference_scripts([text])
        for tid, (s, e) in zip(enc.ids, enc.offsets):
            start = s
            e = max(e, s + 1) if s < len(text) else len(text)
            s = min(s, len(text) - 1)
            if "\ufffd" in tok.decode([tid]):  # a piece of a character's bytes
                want[resolved[e - 1]] += 1
                continue
            own = [resolved[i] for i in range(s, e) if OWN.match(text[i])]
            if not own:
                want[resolved[s]] += 1
                continue
            counts = Counter(own)  # in the order the scripts occur
            r = splitmix(splitmix(start) ^ splitmix(tid + (1 << 40)) ^ len(text)) % len(own)
            for script, k in counts.items():
                if r < k:
                    want[script] += 1
                    break
                r -= k
            drawn += len(counts) > 1
    assert drawn > 100  # the rule is exercised
    f = rep.frame
    got = dict(zip(f.loc[f.group == "script", "key"], f.loc[f.group == "script", "tokens"]))
    assert got == dict(want)


def test_a_token_of_two_scripts_is_split_in_expectation(rw):
    """On real Japanese, where 1-2% of tokens hold kanji and kana, each script row's tokens
    stay within 0.3% of the fractional split by characters (the libraries' offsets); the
    whole-token rule this replaced was 0.8-1.4% off (benchmarks/mixed_tokens.py)."""
    texts = _lines(rw, "text/ja.txt", 6000)
    path = rw / "tokenizers" / "bpe-gpt2" / "tokenizer.json"
    rep = _analyze_texts(texts, path)
    tok = Tokenizer.from_file(str(path))
    frac: Counter = Counter()
    for text, enc in zip(texts, tok.encode_batch(texts, add_special_tokens=False)):
        resolved = _reference_scripts([text])
        for tid, (s, e) in zip(enc.ids, enc.offsets):
            e = max(e, s + 1) if s < len(text) else len(text)
            s = min(s, len(text) - 1)
            if "\ufffd" in tok.decode([tid]):
                frac[resolved[e - 1]] += 1
                continue
            own = [resolved[i] for i in range(s, e) if OWN.match(text[i])]
            for script in own or [resolved[s]]:
                frac[script] += 1 / max(len(own), 1)
    f = rep.frame
    got = dict(zip(f.loc[f.group == "script", "key"], f.loc[f.group == "script", "tokens"]))
    # Binomial noise: 2,018 drawn tokens, each a Bernoulli of variance <= 1/4: a row's count
    # moves by sqrt(2018/4) = 22 tokens (1 sd); 0.3% of the smallest row checked (Kana,
    # 16,700 tokens) is 50, over 2 sd. Measured: 0.05-0.12%.
    for script in ("Hani", "Hira", "Kana"):
        assert abs(got[script] / frac[script] - 1) < 0.003, (script, got[script], frac[script])


def _analyze_texts(texts: list[str], tokenizer: Path | str):
    """analyze() of these documents (written as JSONL: one document each)."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "mixed.jsonl"
        p.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        return analyze([str(p)], [str(tokenizer)], workers=1)


def test_extend_of_a_real_rank_file_on_real_bengali_exits_0_on_bengali(rw, tmp_path, run):
    """`fertility extend` of Llama 3's rank file on Firefox's Bengali messages as shipped: its
    Latin is names and placeholders, reported, not judged; the verdict is Bengali's. Before
    the running-text rule the gate said FAIL on Latin fragments (uncertain `Latn 2.87 >= 3`
    and a blocking pretokenizer-ceiling) with Bengali at 4.7x its base compression."""
    corpus = tmp_path / "bn"
    corpus.mkdir()
    (corpus / "bn.txt").write_text(
        "\n".join(_lines(rw, "shipped/bn.txt", 4000)) + "\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    code, _, err = run("extend", f"{rw}/{LLAMA3}", corpus, "--add", "1500", "--langs", "bn",
                       "--out", out, "--quiet")  # fmt: skip
    assert code == 0, err
    gate = json.loads((out / "extend-report.json").read_text(encoding="utf-8"))["gate"]
    assert gate["passed"]
    judged = {c["key"] for c in gate["checks"] if c["group"] == "script"}
    assert judged == {"Beng"}
    assert [s["key"] for s in gate["skipped"]] == ["Latn"]
