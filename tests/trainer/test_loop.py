"""The training loop on synthetic shards: schedule, accumulation, non-finite steps, rollback."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from fertility.errors import TrainingError
from fertility.shards.format import write_shard
from fertility.trainer import checkpoint as ck
from fertility.trainer.config import TrainConfig
from fertility.trainer.data import Batches, TokenData
from fertility.trainer.loop import Trainer, lr_at
from fertility.trainer.model import config_from_preset

FP = "e" * 64
VOCAB = 64


@pytest.fixture
def data(tmp_path):
    # A learnable stream: a noisy cycle through the vocabulary.
    rng = np.random.default_rng(0)
    tokens = np.arange(20_000) * 7 + (rng.random(20_000) < 0.1) * rng.integers(0, VOCAB, 20_000)
    path = tmp_path / "train-00000.bin"
    write_shard(path, tokens % VOCAB, vocab_size=VOCAB, fingerprint=FP)
    return TokenData([path], fingerprint=FP, vocab_size=VOCAB)


def _cfg(**kw):
    base = dict(
        seq_len=32,
        micro_batch=4,
        steps=12,
        lr=1e-2,
        min_lr=1e-3,
        warmup_steps=3,
        checkpoint_every=4,
        keep_last=5,
        max_bad_steps=3,
        device="cpu",
    )
    return TrainConfig(**{**base, **kw}).validate()


def _trainer(tmp_path, data, callbacks=None, **kw):
    cfg = _cfg(**kw)
    return Trainer(
        tmp_path / "run",
        cfg,
        config_from_preset("tiny", VOCAB),
        data,
        fingerprint=FP,
        quiet=True,
        callbacks=callbacks,
    )


def _metrics(tmp_path):
    return [json.loads(l) for l in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]


def test_schedule_warmup_then_cosine():
    cfg = _cfg(lr=1.0, min_lr=0.1, warmup_steps=4)
    assert [lr_at(s, cfg, 14) for s in (1, 2, 4)] == [0.25, 0.5, 1.0]
    # Closed forms in Python float64 (these three lines): the only rounding is a few ulps
    # (~1e-16) of libm's cos and the multiply-add (cos(pi/2) = 6e-17 vanishes into 1.0 + cos,
    # cos(pi) = -1). approx's default rel=1e-6 is only that rounding; a step off by one in
    # the decay moves lr by 0.14.
    assert lr_at(9, cfg, 14) == pytest.approx(0.55)  # half way through the decay: the midpoint
    assert lr_at(14, cfg, 14) == pytest.approx(0.1)
    assert lr_at(20, cfg, 14) == pytest.approx(0.1)  # past the end it stays at min_lr


def test_loss_falls_and_every_step_is_logged(tmp_path, data):
    summary = _trainer(tmp_path, data, steps=30).run()
    rows = _metrics(tmp_path)
    assert [r["step"] for r in rows] == list(range(1, 31))
    assert [r["tokens"] for r in rows] == [128 * s for s in range(1, 31)]
    assert all(
        set(r) >= {"loss", "lr", "grad_norm", "tokens_per_s", "mfu", "skipped"} for r in rows
    )
    # Not a rounding tolerance: at init (std 0.02) the logits are small but not zero, and the
    # loss sits above ln V by about half their variance (measured 4.180 against ln 64 = 4.159;
    # float32 rounding is ~1e-6). abs=0.2 is 10x that; scoring the padded vocabulary (128)
    # would give ln 128, 0.69 away, and a summed instead of averaged loss over 500.
    assert rows[0]["loss"] == pytest.approx(math.log(VOCAB), abs=0.2)  # random init
    assert np.mean([r["loss"] for r in rows[-5:]]) < math.log(VOCAB) - 1.0
    assert summary["steps"] == 30 and summary["skipped_steps"] == 0
    assert [s for s, _ in ck.list_checkpoints(tmp_path / "run")] == [4, 8, 12, 16, 20, 24, 28, 30][
        -5:
    ]


@pytest.fixture
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def test_gradient_accumulation_matches_one_big_batch(tmp_path, data, float64):
    # 2 micro-batches of 4 windows accumulate to the same update as 1 batch of 8 windows.
    # Compared in float64, so the only difference is summation order. Error analysis: each
    # gradient element sums at most 8 windows x 32 positions = 256 terms, a relative error of
    # about 256 x 1.1e-16 = 3e-14 between the two orders; AdamW's step is lr (1e-2 here) times
    # a normalised gradient, so 5 steps move the weights apart by about 5 x 1e-2 x 3e-14 =
    # 1.5e-15 (measured: 2.8e-14 on the weights, 0 on the losses, where Adam's division by
    # sqrt(v) + eps amplifies differences of gradients near eps). atol=1e-10 leaves over three
    # orders of magnitude to any x86-64 CPU's order of summation (AVX-512 included), and is
    # still 1e8 below what a wrong accumulation does (a halved or doubled gradient moves the
    # weights by about lr per step). In float32 the same test needed 1e-5 and failed at
    # 1.41e-5 on an AVX-512 CPU.
    a = _trainer(tmp_path / "a", data, micro_batch=4, tokens_per_step=256, steps=5)
    b = _trainer(tmp_path / "b", data, micro_batch=8, steps=5)
    assert a.accum == 2 and b.accum == 1
    a.run(), b.run()
    for (name, pa), (_, pb) in zip(a.raw.named_parameters(), b.raw.named_parameters()):
        assert pa.dtype == torch.float64
        assert torch.allclose(pa, pb, rtol=0, atol=1e-10), name
    la = [r["loss"] for r in _metrics(tmp_path / "a")]
    lb = [r["loss"] for r in _metrics(tmp_path / "b")]
    assert np.allclose(la, lb, rtol=0, atol=1e-10)


class Poison:
    """Makes the model's output NaN for the forward passes of the given steps (once each)."""

    def __init__(self, steps):
        self.pending = list(steps)
        self.step = 0
        self.handle = None
        self.weights_at_start = {}
        self.inputs = {}

    def on_step_start(self, step, model):
        self.step = step
        self.weights_at_start.setdefault(step, []).append(
            {k: v.clone() for k, v in model.state_dict().items()}
        )
        if self.handle is None:
            model.register_forward_pre_hook(self._record)
            self.handle = model.register_forward_hook(self._poison)

    def _record(self, module, args):
        self.inputs.setdefault(self.step, []).append(args[0].clone())

    def _poison(self, module, args, output):
        if self.pending and self.pending[0] == self.step:  # one forward per step (no accum)
            self.pending.pop(0)
            return output * float("nan")
        return output


def test_nonfinite_step_never_reaches_the_optimizer(tmp_path, data, capsys):
    poison = Poison([5, 6])
    trainer = _trainer(tmp_path, data, steps=8, callbacks=poison)
    summary = trainer.run()
    rows = _metrics(tmp_path)
    assert [r["step"] for r in rows if r["skipped"]] == [5, 6]
    assert all(r["loss"] is None for r in rows if r["skipped"])
    for step in (6, 7):  # weights after the skipped steps 5 and 6 are those before step 5
        for name, w in poison.weights_at_start[step][0].items():
            assert torch.equal(w, poison.weights_at_start[5][0][name]), name
    assert summary["skipped_steps"] == 2 and summary["rollbacks"] == 0
    assert all(torch.isfinite(p).all() for p in trainer.raw.parameters())
    assert "step 5: non-finite loss" in capsys.readouterr().err


def test_rollback_after_max_bad_steps(tmp_path, data, capsys):
    poison = Poison([6, 7, 8])
    trainer = _trainer(tmp_path, data, steps=10, callbacks=poison)
    trainer.run()
    rows = _metrics(tmp_path)
    event = next(r for r in rows if r.get("event") == "rollback")
    assert event == {
        "event": "rollback",
        "step": 8,
        "to_step": 4,
        "skipped_windows": 16,
        "rollbacks": 1,
    }
    steps = [r["step"] for r in rows if "event" not in r]
    assert steps == [1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7, 8, 9, 10]
    # The replayed step 5 starts from the step-4 checkpoint's weights ...
    saved = ck.load_weights(tmp_path / "run/checkpoints/step-00000004")
    for name, w in poison.weights_at_start[5][1].items():
        assert torch.equal(w, saved[name]), name
    # ... and reads the data after the offending batches, not the batches of steps 5-8 again.
    fresh = Batches(trainer.batches.data, 32, 4, seed=0)
    for _ in range(8):  # the micro-batches of steps 1-8
        fresh.window_indices()
    assert torch.equal(poison.inputs[5][1], fresh.next()[0])
    assert not torch.equal(poison.inputs[5][1], poison.inputs[5][0])
    err = capsys.readouterr().err
    assert "rolled back to step-00000004" in err


def test_rollbacks_beyond_max_rollbacks_stop_the_run(tmp_path, data):
    trainer = _trainer(tmp_path, data, steps=10, max_rollbacks=0, callbacks=Poison([6, 7, 8]))
    with pytest.raises(TrainingError, match="after 0 rollbacks .step 8.*diverges"):
        trainer.run()
    assert not any(r.get("event") == "rollback" for r in _metrics(tmp_path))


def test_rollback_without_a_checkpoint_stops_the_run(tmp_path, data):
    trainer = _trainer(tmp_path, data, steps=6, checkpoint_every=100, callbacks=Poison([2, 3, 4]))
    with pytest.raises(TrainingError, match="no checkpoint to roll back to"):
        trainer.run()


def test_preflight_refusals(tmp_path, data):
    with pytest.raises(TrainingError, match="max_seq_len"):
        _trainer(tmp_path, data, seq_len=256)  # the tiny preset holds 128 positions
    t = Trainer(
        tmp_path / "run",
        _cfg(),
        config_from_preset("tiny", VOCAB),
        data,
        fingerprint=FP,
        quiet=True,
        special_ids={"<|endoftext|>": VOCAB},
    )
    with pytest.raises(TrainingError, match="special ids"):
        t.run()
    assert not (tmp_path / "run/checkpoints").exists()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # inductor's imports
def test_arbiter_compares_the_compiled_module_the_run_uses(tmp_path, data, monkeypatch):
    from fertility.trainer import arbiter

    seen = {}

    def fake_arbiter(model, ids, targets, **kw):
        seen.update(kw, model=model)
        raise TrainingError("stop after the arbiter")

    monkeypatch.setattr(arbiter, "assert_arbiter", fake_arbiter)
    t = _trainer(tmp_path, data, compile=True)  # torch.compile is lazy: nothing compiles here
    with pytest.raises(TrainingError, match="stop after the arbiter"):
        t.run()
    assert seen["model"] is t.raw and seen["compiled"] is t.model and t.model is not t.raw


def test_arbiter_stops_a_model_that_cannot_learn(tmp_path, data):
    t = _trainer(tmp_path, data)
    t.raw.layers[1].mlp.down_proj.register_forward_hook(lambda m, a, out: out.detach())
    with pytest.raises(TrainingError, match=r"layers\.1\.mlp\.down_proj"):
        t.run()


def test_device_side_skip_path_matches_the_per_step_path(tmp_path, data):
    """The CUDA path (losses read every few steps, a non-finite step kept from the optimizer
    by found_inf) gives the same weights and lines as reading every step."""
    runs = []
    for sync_every in (1, 4):
        t = _trainer(tmp_path / str(sync_every), data, steps=4, checkpoint_every=8)
        t.sync_every = sync_every
        t.run()
        runs.append((t, _metrics(tmp_path / str(sync_every))))
    (a, ma), (b, mb) = runs
    assert [r["loss"] for r in ma] == [r["loss"] for r in mb]
    for pa, pb in zip(a.raw.parameters(), b.raw.parameters()):
        assert torch.equal(pa, pb)


def test_nonfinite_step_is_skipped_on_the_device(tmp_path, data):
    t = _trainer(tmp_path, data, steps=4, checkpoint_every=8, max_bad_steps=5)
    t.sync_every = 4
    before = None

    class Poison:
        def on_step_start(self, step, model):
            nonlocal before
            if step == 3:
                before = [p.detach().clone() for p in model.parameters()]
                with torch.no_grad():
                    model.layers[0].attn.q_proj.weight[0, 0] = float("inf")

    t.callbacks = Poison()
    t.run()
    rows = _metrics(tmp_path)
    assert [r["skipped"] for r in rows] == [False, False, True, True]
    assert rows[2]["nonfinite"] in ("loss", "grad_norm") and rows[2]["loss"] is None


def test_heldout_loss_every_eval_every_steps(tmp_path, data):
    t = Trainer(
        tmp_path / "run",
        _cfg(steps=6, eval_every=3, eval_windows=4),
        config_from_preset("tiny", VOCAB),
        data,
        fingerprint=FP,
        quiet=True,
        heldout=data,
    )
    t.run()
    held = [r for r in _metrics(tmp_path) if r.get("event") == "heldout"]
    assert [r["step"] for r in held] == [3, 6] and all(r["tokens"] == 4 * 32 for r in held)
    # Second method: the same four windows scored through the logits.
    from fertility.trainer.model import lm_loss

    w = torch.from_numpy(
        np.stack([data.tokens[0][o : o + 33] for o in range(0, 128, 32)]).astype(np.int64)
    )
    with torch.no_grad():
        want = float(lm_loss(t.raw(w[:, :-1]), w[:, 1:]))
    # The same float32 forward to the last hidden state; the two paths differ in the head's
    # GEMM (2-D chunk against 3-D batch: 64-term dot products, worst 64 x 6e-8 = 4e-6) and the
    # reduction (a sum of 128 per-token losses / 128 against a mean: worst 128 x 6e-8 = 8e-6).
    # Measured: equal here, 1.6e-8 from a float64 forward. rel=1e-4 is 8x the worst-case sum
    # of both for another CPU's order, and 60x below the bug: scoring the next four windows
    # instead of the first four moves the loss by 5.9e-3 relative.
    assert held[-1]["loss"] == pytest.approx(want, rel=1e-4)
    # beside it, the mean training loss of the steps since the pass before (steps 1-3, 4-6)
    steps = {r["step"]: r["loss"] for r in _metrics(tmp_path) if "event" not in r}
    assert held[0]["train_loss"] == pytest.approx(sum(steps[s] for s in (1, 2, 3)) / 3)
    assert held[1]["train_loss"] == pytest.approx(sum(steps[s] for s in (4, 5, 6)) / 3)
    # the overfitting flag follows the rule on these very figures (test_overfit.py tests it)
    over = held[1]["loss"] > held[0]["loss"] and held[1]["train_loss"] < held[0]["train_loss"]
    assert [r["overfitting"] for r in held] == [False, over]


def test_one_compilation_for_the_arbiter_and_the_run(tmp_path, data, monkeypatch):
    """The arbiter compares the compiled module on the run's own batch shape, and the
    held-out loss runs eager: a run compiles exactly the graphs one training call needs."""
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, **kw: real(m, backend=counting))
    torch._dynamo.reset()
    t = _trainer(tmp_path, data, steps=3, compile=True, eval_every=2)
    t.heldout = data
    t.run()
    in_run = len(graphs)
    # Second method: a fresh compiled twin called once, forward and backward, on that shape.
    torch._dynamo.reset()
    graphs.clear()
    twin = torch.compile(
        Trainer(
            tmp_path / "twin",
            _cfg(steps=1),
            config_from_preset("tiny", VOCAB),
            data,
            fingerprint=FP,
            quiet=True,
        ).raw
    )
    x, y = t.batches.next()
    twin(x, y).backward()
    assert in_run == len(graphs) > 0


# -- the arbiter's step check: what the optimizer will read --------------------------------


def _accum_trainer(tmp_path, data):
    # 2 micro-batches per step and grad_clip 1.0, which the tiny model's first gradient
    # (norm ~3 at init on this stream) exceeds: the check covers accumulation and clipping
    t = _trainer(tmp_path, data, micro_batch=4, tokens_per_step=256)
    assert t.accum == 2
    return t


def test_step_check_passes_the_run_s_own_step(tmp_path, data):
    report = _accum_trainer(tmp_path, data).preflight()
    step = report.step
    assert report.ok and step is not None and step.dtype == "float64"
    assert step.micro_batches == 2 and step.clipped
    assert len(step.errors) == report.checked == 20  # every trainable parameter
    # float64 sums in another order only (arbiter.TOL_STEP's analysis): measured ~1e-16
    assert step.worst() < 1e-12
    assert "optimizer step" in report.checks() and "optimizer step (2 micro-batches" in (
        report.line()
    )


@pytest.mark.parametrize(
    "fault, named",
    [
        ("scaled", "layers.1.attn.k_proj.weight"),
        ("zeroed", "layers.0.mlp.down_proj.weight"),
        ("divisor", "gradient norm"),
    ],
)
def test_step_check_catches_what_autograd_alone_does_not_see(tmp_path, data, fault, named):
    t = _accum_trainer(tmp_path, data)

    def scale(q):
        q.grad.mul_(1e-12)

    def zero(q):
        q.grad.zero_()

    if fault == "scaled":  # after accumulation, where torch.autograd.grad never looks
        t.raw.layers[1].attn.k_proj.weight.register_post_accumulate_grad_hook(scale)
    elif fault == "zeroed":
        t.raw.layers[0].mlp.down_proj.weight.register_post_accumulate_grad_hook(zero)
    else:  # the micro-batch losses not divided by accum: twice the gradient, then clipped
        accumulate = t.accumulate
        t.accumulate = lambda m, mb, exact=False: accumulate(
            lambda x, y: m(x, y) * t.accum, mb, exact
        )
    with pytest.raises(TrainingError) as e:
        t.run()
    message = str(e.value)
    assert "the optimizer would read other gradients" in message and named in message
    assert "finite difference" not in message  # autograd's own gradient is right
    assert not (tmp_path / "run/checkpoints").exists()
