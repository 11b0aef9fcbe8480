"""Mixtures in characters: shares met in characters, the corpus order kept without a mix, the
temperature rule, the document table's refusals, and the `--mix` command line."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import regex

from fertility.corpus import Corpus
from fertility.errors import TrainingError
from fertility.tokenizers import load_tokenizer
from fertility.trainer.config import TrainConfig, load_config
from fertility.trainer.data import Batches, TokenData, build_shards
from fertility.trainer.mix import MixBatches, make_batches, parse_mix, plan_mix, plan_warnings
from tests.bpe import byte_level_bpe
from tests.trainer.tokfixture import PassingGate

SEP = "<|endoftext|>"


def _corpus(folder, rng, langs):
    """One file per language; `langs` maps a label to (letters, number of distinct words).
    Few distinct words compress well, many random ones badly."""
    folder.mkdir()
    texts = {}
    for lang, (letters, n_words) in langs.items():
        words = [
            "".join(rng.choice(letters) for _ in range(rng.randint(3, 8))) for _ in range(n_words)
        ]
        texts[lang] = [
            " ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) for _ in range(300)
        ]
        (folder / f"{lang}.txt").write_text("\n".join(texts[lang]) + "\n", encoding="utf-8")
    return texts


@pytest.fixture(scope="module")
def two_langs(tmp_path_factory):
    """de compresses about 3x worse than fr (checked below with the tokenizer itself)."""
    root = tmp_path_factory.mktemp("mix")
    texts = _corpus(
        root / "corpus",
        random.Random(0),
        {"de": ("abcdefghijklm", 4000), "fr": ("nopqrstuvwxyz", 40)},
    )
    byte_level_bpe(texts["de"] + texts["fr"], 420, specials=[SEP], path=root / "tok.json")
    tok = load_tokenizer(str(root / "tok.json"))
    build_shards(
        Corpus([str(root / "corpus")]).documents(),
        tok,
        root / "data",
        heldout_fraction=0.0,
        quiet=True,
        workers=1,
    )
    data = TokenData.from_dir(
        root / "data", "train", fingerprint=tok.fingerprint, vocab_size=tok.vocab_size
    )
    return root, tok, texts, data


def _chars_per_token(tok, docs):
    """A second method: the tokenizer's own encoding, the separator counted as one token."""
    return sum(len(d) for d in docs) / sum(len(e.ids) + 1 for e in tok.encode_batch(docs))


def _decoded_shares(tok, batches, n):
    """Characters and tokens per language from the windows' decoded text: each window's
    language read from its letters with `regex`, its characters counted in the decoded text."""
    sep = tok.special_tokens[SEP]
    chars, tokens = {"de": 0, "fr": 0}, {"de": 0, "fr": 0}
    for _ in range(n):
        _, targets = batches.next()
        for row in targets.tolist():
            text = b"".join(tok.token_bytes(i) for i in row if i != sep).decode("utf-8")
            found = {
                "de" if regex.search("[a-m]", text) else None,
                "fr" if regex.search("[n-z]", text) else None,
            } - {None}
            assert len(found) == 1, text  # one language per window, never a silent crossing
            lang = found.pop()
            chars[lang] += len(text)
            tokens[lang] += len(row)
    return (
        {k: v / sum(chars.values()) for k, v in chars.items()},
        {k: v / sum(tokens.values()) for k, v in tokens.items()},
    )


def test_mix_in_characters_meets_the_character_shares(two_langs):
    _, tok, texts, data = two_langs
    c_de, c_fr = _chars_per_token(tok, texts["de"]), _chars_per_token(tok, texts["fr"])
    assert 2.5 < c_fr / c_de < 3.5  # the premise: de costs about 3x the tokens per character
    cfg = TrainConfig(seq_len=32, micro_batch=8, mix={"de": 0.5, "fr": 0.5})
    batches = make_batches(data, cfg)
    assert isinstance(batches, MixBatches)
    chars, tokens = _decoded_shares(tok, batches, 150)
    # No rounding here (integer counts, a seeded PCG64 permutation: the same on every CPU); the
    # tolerances are for the sample. Tokens: the round robin keeps each language within one
    # window of its share, 1/1200 (measured 5e-5 from the hand-worked share). Characters: 908
    # de and 292 fr windows of 40 +- 2 and 123 +- 20 characters; the windows drawn give the
    # share a standard error of 2.4e-3 (measured 0.5008). abs=0.02 is z = 8 for the characters
    # and 25x the one-window bound; a mix set in tokens instead of characters would give
    # de 0.24 of the characters and 0.5 of the tokens, 0.26 off in both.
    assert chars["de"] == pytest.approx(0.5, abs=0.02)
    # Hand-worked: equal characters need tokens in the ratio of the tokens per character.
    expected_de = (0.5 / c_de) / (0.5 / c_de + 0.5 / c_fr)
    assert 0.7 < expected_de < 0.8
    assert tokens["de"] == pytest.approx(expected_de, abs=0.02)
    # The run's own ledger says the same as the decoded text.
    consumed = batches.consumed()
    total = sum(v["chars"] for v in consumed.values())
    # The ledger counts a document's characters pro rata over its tokens, the decoded text
    # counts them exactly: measured 7e-4 apart over these 1200 windows, abs=0.01 leaves 14x;
    # a ledger of tokens in place of characters would read 0.76, not 0.5.
    assert consumed["de"]["chars"] / total == pytest.approx(chars["de"], abs=0.01)
    assert sum(v["tokens"] for v in consumed.values()) == 150 * 8 * 32


def test_without_a_mix_the_corpus_order_and_proportions_are_kept(two_langs):
    _, tok, texts, data = two_langs
    cfg = TrainConfig(seq_len=32, micro_batch=8)
    counted, plain = make_batches(data, cfg), Batches(data, 32, 8, seed=cfg.seed)
    n = plain.n_windows // 8  # one pass
    for _ in range(n):
        x, _ = counted.next()
        assert np.array_equal(x.numpy(), plain.next()[0].numpy())  # today's batches exactly
    consumed = counted.consumed()
    tokens = {k: len(texts[k]) + sum(len(e.ids) for e in tok.encode_batch(texts[k])) for k in texts}
    chars = {k: sum(len(d) for d in texts[k]) for k in texts}
    got_tok = consumed["de"]["tokens"] / sum(v["tokens"] for v in consumed.values())
    got_chr = consumed["de"]["chars"] / sum(v["chars"] for v in consumed.values())
    # One pass less the 7 of 1439 windows that do not fill a batch of 8 (and the tail shorter
    # than a window): left out, they move a share by at most 7 / 1439 = 0.005 (measured 4e-4
    # and 6e-4). Integer counts: no rounding. abs=0.01 is 2x that bound; tokens and characters
    # of de differ by over 0.2 here, so a ledger that swapped them could not pass.
    assert got_tok == pytest.approx(tokens["de"] / sum(tokens.values()), abs=0.01)
    assert got_chr == pytest.approx(chars["de"] / sum(chars.values()), abs=0.01)


def test_temperature_rule_on_three_languages(tmp_path):
    texts = _corpus(
        tmp_path / "corpus",
        random.Random(1),
        {"de": ("abcdefgh", 3000), "fr": ("ijklmnop", 300), "it": ("qrstuvwx", 40)},
    )
    texts["fr"], texts["it"] = texts["fr"][:120], texts["it"][:30]  # unequal sizes
    for lang in ("fr", "it"):
        (tmp_path / "corpus" / f"{lang}.txt").write_text("\n".join(texts[lang]) + "\n")
    byte_level_bpe(
        [d for v in texts.values() for d in v], 400, specials=[SEP], path=tmp_path / "tok.json"
    )
    tok = load_tokenizer(str(tmp_path / "tok.json"))
    index = build_shards(
        Corpus([str(tmp_path / "corpus")]).documents(),
        tok,
        tmp_path / "data",
        heldout_fraction=0.0,
        quiet=True,
        workers=1,
    )
    T = 0.3
    n = {k: sum(len(d) for d in v) for k, v in texts.items()}
    p = {k: n[k] ** T / sum(m**T for m in n.values()) for k in n}
    c = {k: _chars_per_token(tok, v) for k, v in texts.items()}
    t = {k: (p[k] / c[k]) / sum(p[j] / c[j] for j in p) for k in p}
    plan = plan_mix(index["languages"], {}, T, total_tokens=10**6)
    for k in n:
        got = plan["languages"][k]
        assert got["available_chars"] == n[k]
        # The plan's float64 formulas worked again here on the same integer counts (measured:
        # equal). The tolerances are only the rounding of a 3-term sum, powers and quotients
        # (a few ulps, 1e-15); a c_g without the separator would move token_share by 1e-2.
        assert got["char_share"] == pytest.approx(p[k], rel=1e-12)
        assert got["token_share"] == pytest.approx(t[k], rel=1e-9)
        assert got["passes"] == pytest.approx(t[k] * 10**6 / (n[k] / c[k]), rel=1e-9)
    data = TokenData.from_dir(
        tmp_path / "data", "train", fingerprint=tok.fingerprint, vocab_size=tok.vocab_size
    )
    batches = make_batches(data, TrainConfig(seq_len=16, micro_batch=8, mix_temperature=T))
    for _ in range(100):
        batches.next()
    consumed = batches.consumed()
    dealt = sum(v["tokens"] for v in consumed.values())
    for k in n:  # windows are dealt within one window of the token shares
        assert abs(consumed[k]["tokens"] - t[k] * dealt) <= 16


def test_mix_resumes_from_its_cursor(two_langs):
    _, _, _, data = two_langs
    cfg = TrainConfig(seq_len=32, micro_batch=4, mix={"de": 0.3, "fr": 0.7})
    straight = make_batches(data, cfg)
    rows = [straight.next()[0].numpy() for _ in range(40)]
    first = make_batches(data, cfg)
    for _ in range(25):
        first.next()
    state = json.loads(json.dumps(first.state_dict()))  # what a checkpoint stores
    again = make_batches(data, cfg)
    again.load_state_dict(state)
    for row in rows[25:]:
        assert np.array_equal(again.next()[0].numpy(), row)
    assert again.consumed() == straight.consumed()
    other = make_batches(data, TrainConfig(seq_len=32, micro_batch=4, mix={"de": 0.5, "fr": 0.5}))
    with pytest.raises(TrainingError, match="another mix"):
        other.load_state_dict(state)


def test_mix_under_two_ranks_reads_the_single_process_batch(two_langs):
    _, _, _, data = two_langs
    one = make_batches(data, TrainConfig(seq_len=32, micro_batch=4, mix={"de": 0.5, "fr": 0.5}))
    ranks = [
        make_batches(
            data,
            TrainConfig(seq_len=32, micro_batch=2, mix={"de": 0.5, "fr": 0.5}),
            rank=r,
            world=2,
        )
        for r in (0, 1)
    ]
    for _ in range(10):
        whole = one.next()[0].numpy()
        parts = [b.next()[0].numpy() for b in ranks]
        assert np.array_equal(whole[0::2], parts[0]) and np.array_equal(whole[1::2], parts[1])


@pytest.mark.parametrize(
    "text, message",
    [
        ("de=0.6,fr", "expected LANG=SHARE"),
        ("de=0.6,fr=0.6", "sum to 1.2"),
        ("de=0.5,de=0.5", "given twice"),
        ("de=-1,fr=2", r"\(0, 1\]"),
    ],
)
def test_bad_mix_is_one_line(text, message):
    with pytest.raises(TrainingError, match=message):
        parse_mix(text)


def test_mix_in_config_file_and_refusals(two_langs, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("mix = { de = 0.25, fr = 0.75 }\n")
    assert load_config(path).mix == {"de": 0.25, "fr": 0.75}
    path.write_text("mix = { de = 1.0 }\nmix_temperature = 0.3\n")
    with pytest.raises(TrainingError, match="c.toml.*not both"):
        load_config(path)
    _, _, _, data = two_langs
    with pytest.raises(TrainingError, match="ja = 0.5 names a language with no training text"):
        plan_mix(data.languages, {"de": 0.5, "ja": 0.5}, None, 1000)
    plan = plan_mix(data.languages, {"de": 1.0}, None, 10**7)
    passes = 10**7 / data.languages[0]["tokens"]  # every token goes to de
    # one float64 division each side (measured equal); approx's rel=1e-6 is rounding only
    assert plan["languages"]["de"]["passes"] == pytest.approx(passes) and passes > 4
    assert [w.split(" ")[1] for w in plan_warnings(plan)] == ["de's", "fr"]  # repeated; unused


def test_pretrain_records_the_plan_and_what_was_consumed(two_langs, tmp_path, capsys, run):

    root, _, _, _ = two_langs
    out = tmp_path / "run"
    _mixed_run(root, out, steps=6, checkpoint_every=100, mix={"de": 0.9, "fr": 0.1})
    err = capsys.readouterr().err
    assert "training mix (--mix" in err and "warning: mix: de" not in err
    mix = json.loads((out / "run.json").read_text())["mix"]
    assert mix["rule"] == "shares" and mix["total_tokens"] == 6 * 4 * 32
    assert mix["languages"]["de"]["char_share"] == 0.9
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in rows if "event" not in r][-1]
    assert sum(v["tokens"] for v in last["languages"].values()) == last["tokens"]
    assert mix["consumed"] == last["languages"]
    assert set(mix["consumed"]) == {"de", "fr"}
    # `fertility eval` prints the training mix beside its per-language results.
    code, text, _ = run("eval", out, "--device", "cpu", "--bootstrap", "0")
    de = mix["consumed"]["de"]["chars"] / sum(v["chars"] for v in mix["consumed"].values())
    assert code == 0
    assert (
        f"training mix (shares; share of characters): de 90.0% (tokens "
        f"{mix['languages']['de']['token_share']:.1%}, consumed {de:.1%})"
    ) in text


def test_pretrain_command_refuses_a_bad_mix_in_one_line(two_langs, tmp_path, run):
    root, _, _, _ = two_langs
    base = [
        "pretrain",
        root / "corpus",
        "-t",
        root / "tok.json",
        "--out",
        tmp_path / "r",
        "--device",
        "cpu",
        "--steps",
        "2",
        "--force",
    ]
    code, _, err = run(*base, "--mix", "de=0.6,fr")
    assert code == 2 and err.strip().splitlines() == [
        "error: --mix: 'fr': expected LANG=SHARE, e.g. bn=0.6,en=0.4"
    ]
    code, _, err = run(*base, "--mix", "de=1", "--mix-temperature", "0.3")
    assert code == 2 and "not both" in err
    code, _, err = run(*base, "--mix", "de=0.5,ja=0.5")
    lines = [l for l in err.splitlines() if l.startswith("error:")]
    assert code == 2 and "Traceback" not in err
    assert lines == [
        "error: mix: ja = 0.5 names a language with no training text in the "
        "corpus (its languages: de, fr)"
    ]


def test_document_table_must_match_its_shards(two_langs, tmp_path):
    import shutil

    root, tok, _, _ = two_langs
    data_dir = tmp_path / "data"
    shutil.copytree(root / "data", data_dir)
    table = data_dir / "train-docs.bin"
    raw = table.read_bytes()
    table.write_bytes(raw[:-8])  # a row cut short
    with pytest.raises(TrainingError, match="train-docs.bin: document table is"):
        TokenData.from_dir(
            data_dir, "train", fingerprint=tok.fingerprint, vocab_size=tok.vocab_size
        )
    table.write_bytes(raw[:12] + b"f" * 64 + raw[76:])  # another tokenizer's fingerprint
    with pytest.raises(TrainingError, match="train-docs.bin: document table was made by"):
        TokenData.from_dir(
            data_dir, "train", fingerprint=tok.fingerprint, vocab_size=tok.vocab_size
        )
    # Shards built before the table existed: trained in corpus order, refused with a mix.
    table.unlink()
    index = json.loads((data_dir / "index.json").read_text())
    del index["languages"]
    (data_dir / "index.json").write_text(json.dumps(index))
    old = TokenData.from_dir(
        data_dir, "train", fingerprint=tok.fingerprint, vocab_size=tok.vocab_size
    )
    assert make_batches(old, TrainConfig(seq_len=32, micro_batch=8)).consumed() == {}
    with pytest.raises(TrainingError, match="no document table"):
        make_batches(old, TrainConfig(seq_len=32, micro_batch=8, mix={"de": 1.0}))


def test_a_mix_needs_a_separator_between_documents(two_langs, tmp_path):
    root, tok, _, _ = two_langs
    build_shards(
        Corpus([str(root / "corpus")]).documents(),
        tok,
        tmp_path / "data",
        heldout_fraction=0.0,
        separator="none",
        quiet=True,
        workers=1,
    )
    data = TokenData.from_dir(
        tmp_path / "data", "train", fingerprint=tok.fingerprint, vocab_size=tok.vocab_size
    )
    with pytest.raises(TrainingError, match="a mix needs a separator"):
        make_batches(data, TrainConfig(seq_len=32, micro_batch=8, mix={"de": 0.5, "fr": 0.5}))


def test_run_json_records_what_was_consumed_at_every_checkpoint(two_langs, tmp_path):
    """A run killed mid-way still says what it consumed up to its last checkpoint."""

    root, _, _, _ = two_langs
    out = tmp_path / "run"
    seen = {}  # step about to start -> run.json's consumed at that moment

    class Spy:
        def on_step_start(self, step, model):
            seen[step] = json.loads((out / "run.json").read_text())["mix"]["consumed"]

    _mixed_run(root, out, steps=5, quiet=True, callbacks=Spy())
    rows = {
        r["step"]: r["languages"]
        for r in (json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines())
        if "event" not in r
    }
    steps = sorted(seen)
    assert steps[:2] == [1, 2] and seen[1] is None and seen[2] is None  # nothing saved yet
    # After the checkpoints of steps 2 and 4: what metrics.jsonl says was consumed up to them,
    # unchanged by the steps in between, and 4 windows of 32 target tokens per step.
    assert seen[3] == seen[4] == rows[2] and seen[5] == rows[4]
    for step in (2, 4):
        assert sum(v["tokens"] for v in rows[step].values()) == step * 4 * 32
        assert rows[step]["de"]["chars"] > 0 and rows[step]["fr"]["chars"] > 0
    assert rows[4]["de"]["chars"] > rows[2]["de"]["chars"]
    assert json.loads((out / "run.json").read_text())["mix"]["consumed"] == rows[5]


def test_a_resumed_run_keeps_what_was_consumed_until_its_first_checkpoint(two_langs, tmp_path):

    root, _, _, _ = two_langs
    out = tmp_path / "run"
    seen = {}

    class Crash(Exception):
        pass

    class Spy:
        def __init__(self, crash_at=None):
            self.crash_at = crash_at

        def on_step_start(self, step, model):
            if step == self.crash_at:
                raise Crash  # a run killed after its checkpoint at step 2
            seen[step] = json.loads((out / "run.json").read_text())["mix"]["consumed"]

    with pytest.raises(Crash):
        _mixed_run(root, out, steps=4, quiet=True, callbacks=Spy(crash_at=3))
    at_two = json.loads((out / "run.json").read_text())["mix"]["consumed"]
    assert sum(v["tokens"] for v in at_two.values()) == 2 * 4 * 32
    _mixed_run(root, out, steps=4, quiet=True, resume=True, callbacks=Spy())
    assert seen[3] == at_two  # the resume's run.json, before it saves, keeps the last count
    final = json.loads((out / "run.json").read_text())["mix"]["consumed"]
    assert sum(v["tokens"] for v in final.values()) == 4 * 4 * 32


def _mixed_run(root, out, *, steps, checkpoint_every=2, mix=None, **kw):
    """A tiny CPU pretraining run of the two-language corpus with a --mix (a passing gate)."""
    from fertility.trainer.options import PretrainOptions
    from fertility.trainer.run import pretrain

    settings = dict(
        seq_len=32,
        micro_batch=4,
        steps=steps,
        warmup_steps=1,
        device="cpu",
        heldout_fraction=0.05,
        checkpoint_every=checkpoint_every,
        mix=mix or {"de": 0.5, "fr": 0.5},
        tokens=None,
    )
    callbacks = kw.pop("callbacks", None)
    options = PretrainOptions(
        [str(root / "corpus")], str(root / "tok.json"), out, settings=settings, **kw
    )
    return pretrain(options, gate=lambda p, t: PassingGate(), callbacks=callbacks)
