"""Held-out NLL: windows score every token once, as lm-evaluation-harness's rolling windows
scored with a plain forward pass do; bytes and characters are attributed so bits per byte
recounted from the text agrees; scripts follow fertility.unicode; the random twin sits at
ln(V); intervals behave."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from tokenizers import Tokenizer

from fertility.eval import nll
from fertility.tokenizers import load_tokenizer
from fertility.tokenizers.base import Encoded
from fertility.trainer.model import Transformer, config_from_preset
from tests.bpe import byte_level_bpe

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
SEP = "<|endoftext|>"
LANGS = ("en", "bn", "hi", "zh", "ru")


def lines(lang):
    return [x for x in (CORPUS / f"{lang}.txt").read_text("utf-8").splitlines() if x.strip()]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    path = tmp_path_factory.mktemp("nll") / "tokenizer.json"
    byte_level_bpe([x for g in LANGS for x in lines(g)], 300, specials=[SEP], path=path)
    return path


@pytest.fixture(scope="module")
def tok(bpe):
    return load_tokenizer(str(bpe))


@pytest.fixture(scope="module")
def docs():
    texts, langs = [], []
    for g in LANGS:
        for x in lines(g)[:4]:
            texts.append(x)
            langs.append(g)
    return texts, langs


def random_model(vocab, seed=0, max_seq_len=128):
    torch.manual_seed(seed)
    return Transformer(config_from_preset("tiny", vocab, {"max_seq_len": max_seq_len})).eval()


def reference_nll(model, seq, context):
    """NLL of seq[1:] scored in lm-evaluation-harness's rolling windows (its own window code,
    context_len 1), seq[0] as the prefix token, one plain forward pass per window."""
    out = []
    for ctx, pred in map(
        make_disjoint_window, get_rolling_token_windows(seq[1:], seq[0], context, 1)
    ):
        inp = torch.tensor((ctx + pred)[:-1])[None]
        with torch.no_grad():
            logits = model(inp)[0, -len(pred) :]
        out.append(F.cross_entropy(logits, torch.tensor(pred), reduction="none").double().numpy())
    return np.concatenate(out)


# -- scoring ---------------------------------------------------------------------------------


@pytest.mark.parametrize("context", [128, 32])
def test_scores_equal_a_plain_forward_pass_and_windows_cover_every_token_once(tok, docs, context):
    texts = docs[0][::2]
    model = random_model(tok.vocab_size)
    sep = tok.special_tokens[SEP]
    prep = nll.prepare(texts, tok, context, prefix_id=sep)
    got = nll.score(model, prep, batch_tokens=200)  # several batches of mixed lengths
    expect, n_windowed = [], 0
    for enc in tok.encode_batch(texts):
        seq = [sep] + enc.ids.tolist()
        expect.append(reference_nll(model, seq, context))
        n_windowed += len(enc.ids) > context
    # float32 forwards, batched and padded against one window at a time: per token a
    # log-softmax over 300 logits (worst 300 x 6e-8 = 1.8e-5, typically 1e-6) of 64-term dot
    # products, at losses up to 6.2. Measured: 4.8e-7 apart (1 ulp), 9.5e-7 from float64.
    # atol + rtol x 6.2 = 7e-5 is 4x the worst case and 75x the measurement; a token scored
    # in another window's context moves by up to 0.17 even at random init.
    np.testing.assert_allclose(got, np.concatenate(expect), rtol=1e-5, atol=1e-5)
    assert prep.n_tokens == sum(len(e.ids) for e in tok.encode_batch(texts))
    assert prep.windowed_docs == n_windowed
    assert (prep.windowed_docs > 0) == (context == 32)
    assert max(len(w) for w in prep.windows) <= context + 1


def test_without_a_separator_the_first_token_of_each_document_is_not_scored(tok, docs):
    texts, _ = docs
    model = random_model(tok.vocab_size)
    prep = nll.prepare(texts + ["a"], tok, 128, prefix_id=None)
    encs = tok.encode_batch(texts)
    assert prep.n_tokens == sum(len(e.ids) - 1 for e in encs)
    assert prep.unscored_docs == 1  # "a" is one token: nothing left to score
    got = nll.score(model, prep)
    expect = np.concatenate([reference_nll(model, e.ids.tolist(), 128) for e in encs])
    # the analysis of the test above (measured: 4.8e-7 apart); a shifted token is off by O(0.1)
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)


# -- attribution: bytes, characters, scripts ----------------------------------------------------


def test_bits_per_byte_from_token_sums_agrees_with_a_recount_of_the_text(bpe, tok, docs):
    texts, langs = docs
    model = random_model(tok.vocab_size)
    sep = tok.special_tokens[SEP]
    hf = Tokenizer.from_file(str(bpe))
    for prefix in (sep, None):
        prep = nll.prepare(texts, tok, 32, prefix_id=prefix)
        loss = nll.score(model, prep)
        rows = {
            (r["group"], r["key"]): r
            for r in nll.summarize(prep, langs, {"model": loss}, bootstrap=50)
        }
        # the scored text, recounted: whole documents with a separator; without one, the
        # text after the first token's span (offsets from the tokenizers library itself)
        scored = (
            texts
            if prefix is not None
            else [t[hf.encode(t, add_special_tokens=False).offsets[0][1] :] for t in texts]
        )
        nbytes = [len(s.encode("utf-8")) for s in scored]
        assert rows[("all", "all")]["bytes"] == sum(nbytes)
        assert rows[("all", "all")]["chars"] == sum(len(s) for s in scored)
        bpb = loss.sum() / math.log(2) / sum(nbytes)
        # the same float64 losses summed in another order (a few hundred terms: <= 1e-14)
        # and divided; rel=1e-12 is rounding only: one byte miscounted of 3013 is 3e-4 off
        assert rows[("all", "all")]["bits_per_byte"] == pytest.approx(bpb, rel=1e-12)
        for g in LANGS:
            mine = [b for b, lang in zip(nbytes, langs) if lang == g]
            assert rows[("language", g)]["bytes"] == sum(mine)
        # per-script rows partition the tokens, bytes and NLL of the whole
        scripts = [r for (grp, _), r in rows.items() if grp == "script"]
        for key in ("tokens", "bytes", "chars"):
            assert sum(r[key] for r in scripts) == rows[("all", "all")][key]
        bengali = rows[("script", "Beng")]
        assert bengali["bytes"] > 2 * bengali["chars"]  # 3-byte code points, spaces at 1
        assert bengali["bits_per_char"] > bengali["bits_per_byte"]


class CharTokenizer:
    """One token per code point, except: spaces are dropped (a gap no token covers) and any
    non-ASCII character is cut into two tokens sharing its span, like byte-level tokens."""

    def encode_batch(self, texts):
        out = []
        for t in texts:
            ids, starts, ends = [], [], []
            for i, ch in enumerate(t):
                if ch == " ":
                    continue
                for _ in range(1 if ord(ch) < 128 else 2):
                    ids.append(ord(ch) % 97)
                    starts.append(i)
                    ends.append(i + 1)
            out.append(Encoded(np.array(ids), np.array(starts), np.array(ends)))
        return out


def test_a_token_owns_the_uncovered_text_before_it_and_a_shared_character_once():
    lo, hi = nll.token_spans(np.array([0, 4, 4, 5]), np.array([2, 5, 5, 6]), 8)
    assert lo.tolist() == [0, 2, 5, 5] and hi.tolist() == [2, 5, 5, 8]
    # "ab কখ": a b | ক ক | খ খ ; the space has no token: ক's first token owns it
    prep = nll.prepare(["ab কখ"], CharTokenizer(), 64, prefix_id=0)
    assert prep.nbytes.tolist() == [1, 1, 1 + 3, 0, 3, 0]
    assert prep.nchars.tolist() == [1, 1, 2, 0, 1, 0]
    assert [nll.U.SCRIPTS[s] for s in prep.script] == ["Latn"] * 2 + ["Beng"] * 4
    model = random_model(97, max_seq_len=64)
    rows = {
        r["key"]: r
        for r in nll.summarize(prep, ["bn"], {"model": nll.score(model, prep)}, bootstrap=20)
    }
    assert (rows["Latn"]["bytes"], rows["Beng"]["bytes"]) == (2, 7)
    assert (rows["Latn"]["tokens"], rows["Beng"]["tokens"]) == (2, 4)
    assert rows["all"]["bytes"] == len("ab কখ".encode())
    assert rows["Beng"]["nll_per_token_ci95"] is None  # one document: no interval over docs


# -- the twin and the intervals ------------------------------------------------------------------


def test_random_twin_is_seeded_leaves_the_global_rng_alone_and_sits_at_ln_v(tok, docs):
    texts, langs = docs
    model = random_model(tok.vocab_size, seed=3)
    state = torch.get_rng_state()
    a, b = nll.fresh_twin(model, seed=7), nll.fresh_twin(model, seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.tok_embeddings.weight, b.tok_embeddings.weight)
    assert not torch.equal(a.tok_embeddings.weight, model.tok_embeddings.weight)
    prep = nll.prepare(texts, tok, 64, prefix_id=tok.special_tokens[SEP])
    rows = nll.summarize(
        prep, langs, {"model": nll.score(model, prep), "twin": nll.score(a, prep)}, bootstrap=200
    )
    ln_v = math.log(tok.vocab_size)
    for r in rows:
        assert abs(r["twin_nll_per_token"] - ln_v) < 0.05, r["key"]
        assert abs(r["nll_per_token"] - ln_v) < 0.05, r["key"]


def test_intervals_hold_the_estimate_and_the_paired_difference_is_exact():
    # Documents whose tokens have known NLLs: the model at 1.0 per token, the twin at 3.0,
    # except the second language, where they swap.
    prep = nll.Prepared(
        context=8,
        windows=[],
        skips=[],
        doc=np.repeat(np.arange(6), [3, 4, 5, 3, 4, 5]),
        script=np.full(24, nll.U.SCRIPT_INDEX["Latn"], np.uint8),
        nbytes=np.full(24, 2),
        nchars=np.ones(24, np.int64),
        n_docs=6,
        windowed_docs=0,
        unscored_docs=0,
    )
    langs = ["x", "x", "x", "y", "y", "y"]
    first = prep.doc < 3
    model = np.where(first, 1.0, 3.0) + np.linspace(0, 0.5, 24)
    twin = np.where(first, 3.0, 1.0) + np.linspace(0, 0.5, 24)
    rows = {
        r["key"]: r
        for r in nll.summarize(prep, langs, {"model": model, "twin": twin}, bootstrap=400, seed=1)
    }
    x = rows["x"]
    # float64 sums of 12 known values, in summarize's order against numpy's: a few ulps. The
    # approx defaults (rel=1e-6) are only that rounding; the paired interval is [2, 2] up to
    # the rounding of (3 + e) - (1 + e), and an unpaired one would be ~1 wide.
    assert x["nll_per_token"] == pytest.approx(model[first].mean())
    assert x["twin_minus_model"] == pytest.approx(2.0)
    assert x["twin_minus_model_ci95"] == pytest.approx([2.0, 2.0])  # paired: no spread
    assert rows["y"]["twin_minus_model"] == pytest.approx(-2.0)
    assert x["bits_per_byte"] == pytest.approx(model[first].sum() / math.log(2) / 24)
    for r in rows.values():
        for key in ("nll_per_token", "bits_per_byte", "bits_per_char"):
            lo, hi = r[f"{key}_ci95"]
            assert lo <= r[key] <= hi
        assert r["perplexity"] == pytest.approx(math.exp(r["nll_per_token"]))
    lo, hi = rows["all"]["nll_per_token_ci95"]
    assert hi - lo > 0.5  # the languages differ by 2 nats: resampling documents shows it


def test_the_gap_to_the_twin_in_bits_per_byte_worked_by_hand():
    # Two documents of language x and y; per token: (bytes, model NLL, twin NLL)
    #   doc 0: (1, 1.0, 3.0), (3, 2.0, 3.0)   gap 2 + 1 = 3 nats over 2 tokens, 4 bytes
    #   doc 1: (2, 1.5, 2.5)                  gap 1 nat over 1 token, 2 bytes
    prep = nll.Prepared(
        context=8,
        windows=[],
        skips=[],
        doc=np.array([0, 0, 1]),
        script=np.full(3, nll.U.SCRIPT_INDEX["Latn"], np.uint8),
        nbytes=np.array([1, 3, 2]),
        nchars=np.array([1, 1, 2]),
        n_docs=2,
        windowed_docs=0,
        unscored_docs=0,
    )
    model, twin = np.array([1.0, 2.0, 1.5]), np.array([3.0, 3.0, 2.5])
    rows = {
        r["key"]: r
        for r in nll.summarize(prep, ["x", "y"], {"model": model, "twin": twin}, bootstrap=400)
    }
    ln2 = math.log(2)
    # approx's default rel=1e-6 on float64 sums and one division of a few small numbers (each
    # rounding ~1e-16): a wrong denominator (tokens for bytes, chars) is off by 25-100%
    # all: 4 nats over 3 tokens and 6 bytes
    assert rows["all"]["twin_minus_model"] == pytest.approx(4 / 3)
    assert rows["all"]["twin_minus_model_bits_per_byte"] == pytest.approx(4 / 6 / ln2)
    # each language row is its own document: 3 nats / 4 bytes, 1 nat / 2 bytes; one document
    # gives no interval
    assert rows["x"]["twin_minus_model_bits_per_byte"] == pytest.approx(3 / 4 / ln2)
    assert rows["y"]["twin_minus_model_bits_per_byte"] == pytest.approx(1 / 2 / ln2)
    assert rows["x"]["twin_minus_model_bits_per_byte_ci95"] is None
    # Over 2 documents a replicate that weighs one of them 0 (each about 23% of them: Poisson
    # 0 for one, not for the other) is that document alone, so the 2.5th and 97.5th
    # percentiles are the two documents' own ratios: per byte 1/2 and 3/4 nats, per token 1
    # and 3/2
    assert rows["all"]["twin_minus_model_bits_per_byte_ci95"] == pytest.approx(
        [1 / 2 / ln2, 3 / 4 / ln2]
    )
    assert rows["all"]["twin_minus_model_ci95"] == pytest.approx([1.0, 1.5])
