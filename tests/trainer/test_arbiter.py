"""The gradient-flow arbiter passes healthy models and names the parameter that is cut off,
zeroed or poisoned, or whose gradient a fake "fused kernel" gets wrong."""

import pytest
import torch
import torch.nn.functional as F

from fertility.errors import TrainingError
from fertility.trainer.arbiter import (
    assert_arbiter,
    check_attention_kernels,
    check_gradient_flow,
    compare_paths,
    run_arbiter,
)
from fertility.trainer.kernels import record_calls
from fertility.trainer.model import PRESETS, Transformer, attention_backend, config_from_preset

CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ],
)


def batch(vocab, B=2, T=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (B, T), generator=g)
    return ids, torch.randint(0, vocab, (B, T), generator=g)


def tiny(**over):
    torch.manual_seed(0)
    return Transformer(config_from_preset("tiny", 101, over))


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_arbiter_passes_every_preset(preset):
    """tiny runs at full size; the others keep their full width (d_model, heads, d_ff) but are
    cut to n_layers=1 (the float64 finite-difference check runs 4 forward passes per
    parameter); all run a 16-token sequence and a 2048-token vocab, so the test fits two CPU
    cores. Every parameter kind of the full model is present."""
    over = {} if preset == "tiny" else {"n_layers": 1}
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
    with pytest.raises(
        TrainingError,
        match=r"arbiter failed: 1 parameter got no gradient: "
        r"layers\.0\.mlp\.up_proj\.weight \(none\)",
    ):
        assert_arbiter(model, *batch(101))


def test_zeroed_and_nan_gradients_are_named():
    model = tiny()
    model.layers[1].attn.v_proj.weight.register_hook(lambda g: torch.zeros_like(g))
    model.layers[0].mlp_norm.weight.register_hook(lambda g: torch.full_like(g, float("nan")))
    report = run_arbiter(model, *batch(101))
    assert not report.ok
    assert sorted(report.offenders) == [
        ("layers.0.mlp_norm.weight", "non-finite"),
        ("layers.1.attn.v_proj.weight", "zero"),
    ]
    assert report.path_failures() == []  # a NaN is named once, as an offender
    text = report.format_text()
    assert "layers.1.attn.v_proj.weight: zero" in text and "FAILED" in text


def test_frozen_parameters_are_not_checked():
    model = tiny()
    model.layers[0].attn.q_proj.weight.requires_grad_(False)
    report = check_gradient_flow(model, *batch(101))
    assert report.ok and report.checked == 2 + 9 * 2 - 1
    assert report.frozen == ["layers.0.attn.q_proj.weight"]  # excluded, but never silently
    assert (
        "frozen (not checked) layers.0.attn.q_proj.weight"
        in run_arbiter(model, *batch(101)).format_text()
    )


def test_arbiter_leaves_existing_gradients_untouched():
    model = tiny()
    ids, targets = batch(101)
    w = model.layers[0].attn.k_proj.weight
    w.grad = torch.full_like(w, 3.0)
    report = run_arbiter(model, ids, targets)
    assert report.ok and not report.notes, report.format_text()
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
    assert max(d for d, _ in healthy.values()) < 1e-3
    _fake_fused_kernel(monkeypatch, 0.0)
    diffs = compare_paths(model, ids, targets)
    # q_proj gets no gradient at all on the fast path (exact zeros): ||0 - g|| / ||g|| is 1
    # up to one float64 rounding; a halved dq would give 0.5.
    assert diffs["layers.0.attn.q_proj.weight"][0] == pytest.approx(1.0, abs=1e-12)
    assert diffs["layers.1.attn.q_proj.weight"][0] == pytest.approx(1.0, abs=1e-12)
    assert diffs["layers.1.attn.k_proj.weight"][0] < 1e-3  # dk does not depend on dq
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
    failing = {name for name, _, _ in report.path_failures()}
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
    assert max(d for d, _ in diffs.values()) < 1e-3


def test_errors_inside_a_check_become_notes_not_exceptions():
    model = tiny()
    ids = torch.zeros(1, 200, dtype=torch.long)  # longer than tiny's max_seq_len 128
    report = run_arbiter(model, ids, ids)
    assert not report.ok and any("max_seq_len" in n for n in report.notes)
    with pytest.raises(TrainingError, match="max_seq_len"):
        assert_arbiter(model, ids, ids)


# -- wrong but nonzero gradients: only the float64 finite difference sees them -------------


class _NoGrad(torch.autograd.Function):
    """Identity forward; backward returns no gradient at all (None)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return None


def _exact_failures(model, ids, targets):
    assert check_gradient_flow(model, ids, targets).ok  # nonzero and finite: looks healthy
    report = run_arbiter(model, ids, targets)
    assert not report.ok
    return {name for name, _ in report.exact_failures()}


def test_tied_weight_that_loses_its_lm_head_gradient_is_caught(monkeypatch):
    import fertility.trainer.model as M

    model = tiny()
    real = M.chunked_lm_loss
    monkeypatch.setattr(
        M, "chunked_lm_loss", lambda h, w, *a, **k: real(h, _NoGrad.apply(w), *a, **k)
    )
    # The embedding use still gives the tied matrix a gradient; the LM-head use is lost.
    assert "tok_embeddings.weight" in _exact_failures(model, *batch(101))


def test_function_that_returns_no_input_gradient_is_caught(monkeypatch):
    model = tiny()
    up = model.layers[1].mlp.up_proj
    monkeypatch.setattr(up, "forward", lambda x: F.linear(_NoGrad.apply(x), up.weight))
    failing = _exact_failures(model, *batch(101))
    # Everything below loses the up_proj path (gate_proj and the residual still carry some).
    assert {"layers.0.attn.q_proj.weight", "layers.1.mlp_norm.weight"} <= failing
    assert "layers.1.mlp.up_proj.weight" not in failing  # its own gradient is still right


def test_half_the_rows_detached_is_caught(monkeypatch):
    model = tiny()
    up = model.layers[0].mlp.up_proj
    half = up.weight.shape[0] // 2
    monkeypatch.setattr(
        up,
        "forward",
        lambda x: F.linear(x, torch.cat([up.weight[:half], up.weight[half:].detach()])),
    )
    assert _exact_failures(model, *batch(101)) == {"layers.0.mlp.up_proj.weight"}


def test_gradient_scaled_by_1e_12_is_caught():
    model = tiny()
    model.layers[1].attn.k_proj.weight.register_hook(lambda g: g * 1e-12)
    report = run_arbiter(model, *batch(101))
    assert dict(report.exact_failures()).keys() == {"layers.1.attn.k_proj.weight"}
    # |fd - ag| / |fd| with ag = 1e-12 x the true derivative: 1 - 1e-12 x (true / fd), in
    # float64 (measured 1 - 1e-12) whatever the finite difference's own error; abs=1e-6 is
    # rounding only, and an honest gradient scores ~1e-4.
    assert report.exact["layers.1.attn.k_proj.weight"] == pytest.approx(1.0, abs=1e-6)
    assert "finite difference" in report.summary()


# -- fused attention in bf16: judged against the math kernel's own bf16 noise --------------


class _Fault(torch.autograd.Function):
    """Identity forward; backward applies `fault` to the incoming gradient."""

    @staticmethod
    def forward(ctx, x, fault):
        ctx.fault = fault
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return ctx.fault(g), None


def _fake_kernel(monkeypatch, on_q=None, on_v=None):
    real = F.scaled_dot_product_attention

    def sdpa(q, k, v, **kw):
        if torch.backends.cuda.flash_sdp_enabled():  # the "fused" path only
            q = _Fault.apply(q, on_q) if on_q else q
            v = _Fault.apply(v, on_v) if on_v else v
        return real(q, k, v, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa)


def _zero_last_eighth(g):
    g = g.clone()
    g[..., -g.shape[-2] // 8 :, :] = 0
    return g


@pytest.mark.parametrize(
    "fault, tensor",
    [
        (dict(on_q=lambda g: g * 0.97), "dq"),
        (dict(on_v=_zero_last_eighth), "dv"),
    ],
)
def test_bf16_kernel_faults_beyond_honest_noise_are_caught(monkeypatch, fault, tensor):
    model = tiny()
    ids, targets = batch(101, B=2, T=64)
    honest = check_attention_kernels(model, ids, amp_dtype=torch.bfloat16)
    # CPU: the fused kernel "auto" stands for is the CPU's flash kernel, checked by name
    assert len(honest) == 3 * 2 and all(e <= t for e, t in honest.values()), honest
    _fake_kernel(monkeypatch, **fault)
    kernels = check_attention_kernels(model, ids, amp_dtype=torch.bfloat16)
    bad = {name for name, (e, t) in kernels.items() if e > t}
    assert bad == {f"attention[0].{tensor}[flash]", f"attention[1].{tensor}[flash]"}
    report = run_arbiter(model, ids, targets, amp_dtype=torch.bfloat16)
    assert not report.ok and f"attention[0].{tensor}[flash]" in report.summary()


# -- like with like: the kernels see the model's own layouts (the H200 false alarm, #37) -----


class _PlanFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, kernel, kw):
        ctx.save_for_backward(q, k, v)
        ctx.kernel, ctx.kw = kernel, kw
        return kernel.real(q, k, v, **kw)

    @staticmethod
    def backward(ctx, dout):
        q, k, v = ctx.saved_tensors
        key = tuple((t.shape, t.stride(), t.dtype) for t in (q, k, v))
        stride = ctx.kernel.plans.setdefault(key, dout.stride())
        dout = torch.as_strided(dout, dout.shape, stride)  # read through the cached plan
        leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
        with torch.enable_grad():
            y = ctx.kernel.real(*leaves, **ctx.kw)
        return (*torch.autograd.grad(y, leaves, dout), None, None)


class _CachedPlanKernel:
    """A "fused" kernel with the flaw the H200 run pointed at: its backward plan is cached by
    q/k/v sizes, strides and dtype, not by dO's strides, so a later backward whose dO has
    another memory layout is read through the first one's strides. Its arithmetic is the
    math kernel's, so any difference it shows comes from the plan alone."""

    def __init__(self, real):
        self.real, self.plans = real, {}

    def __call__(self, q, k, v, **kw):
        if not torch.backends.cuda.flash_sdp_enabled():  # pinned to math: the real one
            return self.real(q, k, v, **kw)
        return _PlanFn.apply(q, k, v, self, kw)


def _install_cached_plan_kernel(monkeypatch):
    kernel = _CachedPlanKernel(F.scaled_dot_product_attention)
    monkeypatch.setattr(F, "scaled_dot_product_attention", kernel)
    return kernel


def test_the_kernel_check_hands_over_the_models_own_do_layout():
    model = tiny()
    ids, targets = batch(101, B=1, T=32)
    calls = record_calls(lambda: model(ids, targets), list(model.parameters()))
    B, H, T, D = calls[0].q.shape
    # y.transpose(1, 2).reshape(B, T, H * D) hands its backward a (B, T, H, D) memory order
    assert [c.dout_stride for c in calls] == [torch.empty(B, T, H, D).transpose(1, 2).stride()] * 2


def test_a_kernel_that_caches_its_plan_by_qkv_does_not_fail_an_honest_model(monkeypatch):
    model = tiny()
    ids, targets = batch(101)
    kernel = _install_cached_plan_kernel(monkeypatch)
    # The flaw is real: the same q, k, v with dO in the other layout gives wrong gradients.
    q, k, v = (torch.randn(1, 8, 2, 4).transpose(1, 2) for _ in range(3))  # (B, H, T, D) views
    up = torch.randn(1, 8, 2, 4)
    grads = []
    for dout in (up.transpose(1, 2), up.transpose(1, 2).contiguous()):  # same values
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        with attention_backend("flash"):
            y = kernel(*leaves, is_causal=True)
        grads.append(torch.autograd.grad(y, leaves, dout)[0])
    assert not torch.allclose(grads[0], grads[1])
    # The arbiter replays every call with the model's own layouts: no false alarm.
    report = run_arbiter(model, ids, targets)
    assert report.ok, report.format_text()
    assert report.kernels and max(d for d, _ in report.path_diffs.values()) < 1e-3


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_honest_bf16_fused_kernels_pass_and_a_wrong_one_is_named(monkeypatch, device):
    """The device's real fused kernels in bf16 (CPU: flash; CUDA: flash, efficient, cudnn) on
    a model of full width: an honest model passes every check; a dq scaled by 0.97 inside
    the fused path is named with its kernel."""
    torch.manual_seed(0)
    over = {"n_layers": 1} if device == "cpu" else {}
    T = 64 if device == "cpu" else 1024
    model = Transformer(config_from_preset("small", 2048, over)).to(device)
    ids, targets = (t.to(device) for t in batch(2048, B=2, T=T))
    report = run_arbiter(model, ids, targets, amp_dtype=torch.bfloat16)
    assert report.ok, report.format_text()
    checked = {name.rsplit("[", 1)[1].rstrip("]") for name in report.kernels}
    unusable = {why.split()[2].rstrip(":") for why in report.skipped if "attention kernel" in why}
    fused = {"flash"} if device == "cpu" else {"flash", "efficient", "cudnn"}
    assert "flash" in checked and checked | unusable == fused, report.format_text()
    _fake_kernel(monkeypatch, on_q=lambda g: g * 0.97)
    report = run_arbiter(model, ids, targets, amp_dtype=torch.bfloat16)
    assert not report.ok and "attention[0].dq[flash]" in report.summary()
