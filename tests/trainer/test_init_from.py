"""`pretrain --init-from`: continued pretraining of a Llama folder with an extended tokenizer.

The base model is a tiny Llama trained here on English and exported (`fertility export`); its
tokenizer is extended with Bengali (`fertility extend`). Expected values come from
transformers' own LlamaForCausalLM on the exported folders.
"""

import json
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import Tokenizer

from tests.bpe import byte_level_bpe
from tests.trainer import extended
from tests.trainer.extended import ENGLISH, EOT, ROOT, lines


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    return extended.world(tmp_path_factory)


def _hf(folder: Path):
    return transformers.LlamaForCausalLM.from_pretrained(str(folder), torch_dtype=torch.float32)


def test_step0_english_loss_is_the_base_models(world):
    tmp, seen, _ = world
    base = _hf(tmp / "base-model")
    base_ids = (
        Tokenizer.from_file(str(tmp / "base-model" / "tokenizer.json"))
        .encode(ENGLISH, add_special_tokens=False)
        .ids
    )
    assert seen["ids"] == base_ids  # English keeps its ids
    with torch.no_grad():
        want = base(torch.tensor([base_ids])).logits.double()
    v = want.shape[-1]
    got = seen["logits"]
    assert got.shape[-1] == v + 200  # the 200 new rows
    # Two float32 forwards of the same weights (ours, transformers'): dot products of 64
    # (d_model) and 256 (d_ff) terms through 2 layers. Measured: bitwise equal here, and each
    # 9e-7 at most from a float64 forward (|logits| <= 2), so another CPU's order moves a logit
    # by ~1e-6; the worst case, 256 x 6e-8 = 1.5e-5 per layer's widest sum, stays under
    # atol + rtol x |logit| = 1e-4 + 2e-4. Loading q/k without the rotary permutation (the
    # mildest wrong mapping, measured) moves logits by 3.3e-3, 10x over it.
    assert torch.allclose(got[..., :v], want, atol=1e-4, rtol=1e-4)

    def loss(logits):  # next-token loss over the base vocabulary, float64
        lp = torch.log_softmax(logits[0, :-1, :v], -1)
        return -lp.gather(-1, torch.tensor(base_ids[1:])[:, None]).mean().item()

    # Mean over ~45 tokens of log_softmax (float64) of the logits above: a token's loss moves
    # by at most 2 x its largest logit error (~1e-6, above), and independent errors average
    # down by sqrt(45): ~3e-7 per forward (measured 1.4e-8 from float64). abs=1e-6 leaves 3x
    # on that estimate and 35x on the measurement; it cannot be looser, as the q/k rotary
    # permutation bug above moves this loss by only 1.7e-5.
    assert loss(got) == pytest.approx(loss(want), abs=1e-6)


def test_new_rows_are_the_mean_of_the_base_rows_that_spell_them(world):
    tmp, _, _ = world
    from safetensors.torch import load_file

    base = load_file(str(tmp / "base-model" / "model.safetensors"))["model.embed_tokens.weight"]
    ids_map = json.loads((tmp / "ext" / "ids-map.json").read_text(encoding="utf-8"))
    from fertility.tokenizers import load_tokenizer
    from fertility.trainer.init import load_into, model_config, plan
    from fertility.trainer.model import Transformer

    tok = load_tokenizer(str(tmp / "ext" / "tokenizer.json"))
    model = Transformer(model_config(tmp / "base-model", tok.vocab_size))
    load_into(model, plan(tmp / "base-model", tok, "mean"))
    emb = model.tok_embeddings.weight.detach()
    assert torch.equal(emb[: base.shape[0]], base)
    for e in ids_map["new"][:50]:  # exact: trainer.init computes the same double mean, cast
        assert torch.equal(emb[e["id"]], base[e["base_ids"]].double().mean(0).float())


def test_run_folder_records_the_base_and_the_extension(world):
    tmp, _, _ = world
    run = json.loads((tmp / "run-ext" / "run.json").read_text(encoding="utf-8"))
    init = run["init"]
    assert Path(init["model_dir"]) == (tmp / "base-model").resolve()
    assert init["new_rows"] == 200 and init["spelled_rows"] == 200
    assert init["ids_map"] == str(tmp / "ext" / "ids-map.json")
    assert "mean" in init["rule"] and "base-model" in init["checked"]
    assert run["train"]["init_from"] == str(tmp / "base-model")


def _nll_per_char(model, tok: Tokenizer, texts: list[str], ctx: int) -> float:
    """Summed next-token NLL (nats) of every token of every text, each text after <|endoftext|>,
    in windows of `ctx` tokens, over the number of characters."""
    eot = tok.token_to_id(EOT)
    total, chars = 0.0, 0
    for t in texts:
        ids = [eot] + tok.encode(t, add_special_tokens=False).ids
        for a in range(0, len(ids) - 1, ctx - 1):
            w = torch.tensor([ids[a : a + ctx]])
            with torch.no_grad():
                lp = torch.log_softmax(model(w).logits.double(), -1)
            total -= lp[0, :-1].gather(-1, w[0, 1:, None]).sum().item()
        chars += len(t)
    return total / chars


def test_bengali_nll_per_character_falls_below_the_base_models(world):
    tmp, _, _ = world
    held = [
        json.loads(x)
        for x in (tmp / "run-ext" / "data" / "heldout.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    ]
    bn = [r["text"] for r in held if r.get("lang") == "bn"][:20]
    assert len(bn) >= 10
    base = _nll_per_char(
        _hf(tmp / "base-model"),
        Tokenizer.from_file(str(tmp / "base-model" / "tokenizer.json")),
        bn,
        64,
    )
    ext = _nll_per_char(
        _hf(tmp / "ext-model"),
        Tokenizer.from_file(str(tmp / "ext-model" / "tokenizer.json")),
        bn,
        64,
    )
    assert ext < base, (ext, base)


def test_a_tokenizer_that_is_not_the_models_is_refused(world, tmp_path):
    from fertility.errors import TrainingError
    from fertility.tokenizers import load_tokenizer
    from fertility.trainer.init import plan

    tmp, _, _ = world
    other = byte_level_bpe(
        lines(ROOT / "corpus" / "es.txt"),
        900,
        specials=[EOT],
        path=tmp_path / "other" / "tokenizer.json",
    )
    assert other.get_vocab_size() > 512
    with pytest.raises(TrainingError, match="the model's tokenizer"):
        plan(tmp / "base-model", load_tokenizer(str(tmp_path / "other" / "tokenizer.json")))
    # the extension without its ids map: the new rows would have no rule
    lone = tmp_path / "lone" / "tokenizer.json"
    lone.parent.mkdir()
    lone.write_bytes((tmp / "ext" / "tokenizer.json").read_bytes())
    with pytest.raises(TrainingError, match="no ids-map.json"):
        plan(tmp / "base-model", load_tokenizer(str(lone)))
