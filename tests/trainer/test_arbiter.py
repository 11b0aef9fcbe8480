"""The gradient-flow arbiter passes healthy models and names the parameter that is cut off,
zeroed or poisoned, or whose gradient a fake "fused kernel" gets wrong."""

import pytest
import torch
import torch.nn.functional as F

from fertility.errors import TrainingError
from trainer.arbiter import (
    assert_arbiter,
    check_gradient_flow,
    compare_paths,
    run_arbiter,
)
from trainer.model import PRESETS, Transformer, config_from_preset


def batch(vocab, B=2, T=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (B, T), generator=g)
    return ids, torch.randint(0, vocab, (B, T), generator=g)


def tiny(**over):
    torch.manual_seed(0)
    return Transformer(config_from_preset("tiny", 101, over))


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_arbiter_passes_every_preset(preset):
    """tiny and small run at full size. base and 0.4b keep their full width (d_model, heads,
    d_ff) but are cut to n_layers=1; all run a 16-token sequence and a 2048-token vocab, so
    the test fits two CPU cores and a few seconds. Every parameter kind of the full model
    is present; the vocabulary size changes no code path."""
    over = {} if preset in ("tiny", "small") else {"n_layers": 1}
    torch.manual_seed(0)
    model = Transformer(config_from_preset(preset, 2048, over))
    ids, targets = batch(2048)
    report = run_arbiter(model, ids, targets)
    assert report.ok, report.format_text()
    assert report.checked == 2 + 9 * model.cfg.n_layers  # embedding, final norm, 9 per block
    assert set(report.path_diffs) == {n for n, p in model.named_parameters()}


def test_detached_parameter_is_named_none(monkeypatch):
    model = tiny()
    up = model.layers[0].mlp.up_proj
    monkeypatch.setattr(up, "forward", lambda x: F.linear(x, up.weight.detach()))
    report = check_gradient_flow(model, *batch(101))
    assert not report.ok
    assert report.offenders == [("layers.0.mlp.up_proj.weight", "none")]
    with pytest.raises(TrainingError, match=r"arbiter failed: 1 parameter got no gradient: "
                                            r"layers\.0\.mlp\.up_proj\.weight \(none\)"):
        assert_arbiter(model, *batch(101))


def test_zeroed_and_nan_gradients_are_named():
    model = tiny()
    model.layers[1].attn.v_proj.weight.register_hook(lambda g: torch.zeros_like(g))
    model.layers[0].mlp_norm.weight.register_hook(lambda g: torch.full_like(g, float("nan")))
    report = run_arbiter(model, *batch(101))
    assert not report.ok
    assert sorted(report.offenders) == [("layers.0.mlp_norm.weight", "non-finite"),
                                        ("layers.1.attn.v_proj.weight", "zero")]
    assert report.path_failures() == []  # a NaN is named once, as an offender
    text = report.format_text()
    assert "layers.1.attn.v_proj.weight: zero" in text and "FAILED" in text


def test_frozen_parameters_are_not_checked():
    model = tiny()
    model.layers[0].attn.q_proj.weight.requires_grad_(False)
    report = check_gradient_flow(model, *batch(101))
    assert report.ok and report.checked == 2 + 9 * 2 - 1


def test_arbiter_leaves_existing_gradients_untouched():
    model = tiny()
    ids, targets = batch(101)
    w = model.layers[0].attn.k_proj.weight
    w.grad = torch.full_like(w, 3.0)
    run_arbiter(model, ids, targets)
    assert torch.equal(w.grad, torch.full_like(w, 3.0))
    assert model.norm.weight.grad is None


class _ScaleGrad(torch.autograd.Function):
    """Identity forward; backward multiplies the incoming gradient by `scale`."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


def _fake_fused_kernel(monkeypatch, scale):
    """A broken "fused" SDPA: whenever the fused kernels are allowed (i.e. not pinned to
    the math reference), the gradient reaching q is multiplied by `scale`."""
    real = F.scaled_dot_product_attention

    def sdpa(q, k, v, **kw):
        if torch.backends.cuda.flash_sdp_enabled():
            q = _ScaleGrad.apply(q, scale)
        return real(q, k, v, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa)


def test_compare_paths_catches_a_fused_kernel_that_drops_dq(monkeypatch):
    model = tiny()
    ids, targets = batch(101)
    healthy = compare_paths(model, ids, targets)
    assert max(healthy.values()) < 1e-3
    _fake_fused_kernel(monkeypatch, 0.0)
    diffs = compare_paths(model, ids, targets)
    # q_proj gets no gradient at all on the fast path: the difference is the whole gradient
    assert diffs["layers.0.attn.q_proj.weight"] == pytest.approx(1.0)
    assert diffs["layers.1.attn.q_proj.weight"] == pytest.approx(1.0)
    assert diffs["layers.1.attn.k_proj.weight"] < 1e-3  # dk does not depend on dq
    report = run_arbiter(model, ids, targets)
    assert not report.ok
    assert "layers.0.attn.q_proj.weight" in report.summary()


def test_path_comparison_catches_what_the_flow_check_cannot(monkeypatch):
    # A halved dq is finite and nonzero: the flow check passes, only the comparison fails.
    model = tiny()
    ids, targets = batch(101)
    _fake_fused_kernel(monkeypatch, 0.5)
    assert check_gradient_flow(model, ids, targets).ok
    report = run_arbiter(model, ids, targets)
    assert not report.ok and not report.offenders
    failing = {name for name, _ in report.path_failures()}
    assert {"layers.0.attn.q_proj.weight", "layers.1.attn.q_proj.weight"} <= failing
    with pytest.raises(TrainingError, match=r"layers\.0\.attn\.q_proj\.weight \(0\.5"):
        assert_arbiter(model, ids, targets)


def test_compiled_path_is_compared_under_clean_names():
    model = tiny()
    ids, targets = batch(101)
    # The "eager" dynamo backend traces without code generation: fast, no C++ compiler.
    compiled = torch.compile(model, backend="eager")
    diffs = compare_paths(model, ids, targets, compiled=compiled)
    keys = {n for n, _ in model.named_parameters()}
    assert set(diffs) == keys | {f"compiled:{n}" for n in keys}
    assert max(diffs.values()) < 1e-3


def test_errors_inside_a_check_become_notes_not_exceptions():
    model = tiny()
    ids = torch.zeros(1, 200, dtype=torch.long)  # longer than tiny's max_seq_len 128
    report = run_arbiter(model, ids, ids)
    assert not report.ok and any("max_seq_len" in n for n in report.notes)
    with pytest.raises(TrainingError, match="max_seq_len"):
        assert_arbiter(model, ids, ids)
