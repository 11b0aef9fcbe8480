"""A decoder-only transformer, numerically identical to Hugging Face's LlamaForCausalLM.

Read top to bottom: config and presets, the three building blocks (RMSNorm, attention with
RoPE, SwiGLU MLP), the model, the loss, the attention-backend switch, and the 1:1 mapping
onto Llama's parameter names and config.json used by `fertility export --to hf`.

Every numerical choice copies Llama (transformers' modeling_llama.py) on purpose: RoPE in
the non-interleaved "rotate_half" layout with inv_freq computed in float32, RMSNorm computed
in float32 and cast back before the weight multiply, no biases anywhere. A checkpoint
trained here therefore loads into LlamaForCausalLM without permuting a single weight.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, cast

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

from fertility.errors import TrainingError

if TYPE_CHECKING:  # run.json's `model` record (fertility/schemas/run.py), for mypy only
    from fertility.schemas import run as run_json

# Llama rounds the SwiGLU hidden size up to a multiple of 256 (tensor-core friendly shapes).
FF_MULTIPLE_OF = 256


# ModelConfig's sizes: whole numbers >= 1, checked by the config itself and by
# trainer/config.py for a [model] table (named once, here).
SIZE_FIELDS = (
    "vocab_size",
    "d_model",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "d_ff",
    "max_seq_len",
    "pad_vocab_to",
)


@dataclass
class ModelConfig:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int | None = None  # grouped-query attention; None means n_heads (plain MHA)
    d_ff: int | None = None  # SwiGLU hidden size; None means 8/3*d_model rounded up to 256
    max_seq_len: int = 1024
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True
    init_std: float = 0.02
    # The embedding and LM head get rows up to a multiple of this (tensor-core friendly
    # matmul shapes); the extra rows are never an input and are cut from the logits, so
    # they change no logit, no loss and no sample. vocab_size stays the real id count.
    pad_vocab_to: int = 128

    def __post_init__(self) -> None:
        # Resolve the defaults here so to_dict(), the checkpoint manifest and the HF
        # config.json all carry the concrete sizes, never a None a reader must re-derive.
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.d_ff is None:
            hidden = int(8 * self.d_model / 3)
            self.d_ff = FF_MULTIPLE_OF * ((hidden + FF_MULTIPLE_OF - 1) // FF_MULTIPLE_OF)
        for name in SIZE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TrainingError(
                    f"model config: {name} must be a positive integer, got {value!r}"
                )
        if self.d_model % self.n_heads:
            raise TrainingError(
                f"model config: d_model {self.d_model} is not divisible by n_heads {self.n_heads}"
            )
        if self.n_heads % self.n_kv_heads:
            raise TrainingError(
                f"model config: n_heads {self.n_heads} is not divisible by "
                f"n_kv_heads {self.n_kv_heads}"
            )
        if self.head_dim % 2:
            raise TrainingError(f"model config: head size {self.head_dim} must be even for RoPE")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def resolved_n_kv_heads(self) -> int:
        """n_kv_heads as __post_init__ resolved it (an int once the config is built)."""
        assert self.n_kv_heads is not None, "__post_init__ resolves n_kv_heads"
        return self.n_kv_heads

    @property
    def resolved_d_ff(self) -> int:
        """d_ff as __post_init__ resolved it (an int once the config is built)."""
        assert self.d_ff is not None, "__post_init__ resolves d_ff"
        return self.d_ff

    @property
    def padded_vocab_size(self) -> int:
        """Rows of the embedding and LM head (vocab_size rounded up to pad_vocab_to)."""
        m = self.pad_vocab_to
        return m * ((self.vocab_size + m - 1) // m)

    def to_dict(self) -> run_json.ModelConfig:
        # asdict is untyped; tests/test_schemas.py checks the record names these fields
        return cast("run_json.ModelConfig", asdict(self))

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        for key in d:
            if key not in known:
                raise TrainingError(
                    f"model config: unknown key {key!r} (known: {', '.join(sorted(known))})"
                )
        try:
            return cls(**d)
        except TypeError as e:  # a required key is missing
            raise TrainingError(f"model config: {e}") from None


# Presets are data. Parameter counts for vocab_size=32000 with tied embeddings, as printed
# by `python -m fertility.trainer.model` (num_params(), total / non-embedding):
#   tiny     2,179,392 /     131,392  (CPU tests only)
#   small   42,082,816 /  25,698,816
#   base   109,529,856 /  84,953,856  (GPT-2-small shape; 123,551,232 with a 50257 vocab)
#   0.4b   397,722,624 / 364,954,624  (430,490,624 with a 64000 vocab)
PRESETS: dict[str, dict] = {
    "tiny": {"d_model": 64, "n_layers": 2, "n_heads": 4, "max_seq_len": 128},
    "small": {"d_model": 512, "n_layers": 8, "n_heads": 8, "d_ff": 1408, "max_seq_len": 1024},
    "base": {"d_model": 768, "n_layers": 12, "n_heads": 12, "max_seq_len": 1024},
    # d_ff 3584 = 3.5*d_model: brings the 24x1024 shape to ~0.40B total at a 32k vocab
    # (0.43B at 64k), the size of the published run.
    "0.4b": {"d_model": 1024, "n_layers": 24, "n_heads": 16, "d_ff": 3584, "max_seq_len": 2048},
}


def config_from_preset(name: str, vocab_size: int, overrides: dict | None = None) -> ModelConfig:
    if name not in PRESETS:
        raise TrainingError(
            f"model preset {name!r} is unknown (known presets: {', '.join(PRESETS)})"
        )
    d = {**PRESETS[name], "vocab_size": vocab_size, **(overrides or {})}
    return ModelConfig.from_dict(d)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Statistics in float32 even under bf16 autocast, cast back *before* the weight
        # multiply: exactly Llama's order, so bf16 runs round the same way as HF.
        dtype = x.dtype
        x = x.to(torch.promote_types(dtype, torch.float32))  # float64 stays float64
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_cos_sin(
    seq_len: int, head_dim: int, theta: float, device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape [seq_len, head_dim] in float32, Llama's duplicated-halves layout."""
    inv_freq = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim)
    )
    freqs = torch.outer(torch.arange(seq_len, device=device).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # Pair i rotates with i + head_dim/2 (not with its neighbour): Llama's HF convention.
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        n_kv = cfg.resolved_n_kv_heads
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, n_kv, cfg.head_dim
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, n_kv * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, n_kv * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.n_kv_heads != self.n_heads:
            # Query head h reads kv head h // n_rep, as Llama's repeat_kv does.
            n_rep = self.n_heads // self.n_kv_heads
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        # Looked up through F at call time, so attention_backend() (and tests) can steer it.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.resolved_d_ff, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.resolved_d_ff, bias=False)
        self.down_proj = nn.Linear(cfg.resolved_d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.padded_vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.padded_vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_embeddings.weight
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        # GPT-2 init: every residual branch adds to the stream, so the stream's variance
        # grows with depth; shrinking the two projections that write into it (o_proj,
        # down_proj) by 1/sqrt(2*n_layers) keeps the output scale independent of depth.
        std = self.cfg.init_std
        resid_std = std / math.sqrt(2 * self.cfg.n_layers)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, 0.0, resid_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, T, vocab_size] (float32, or float64 for a float64 model); with
        `targets`, the mean next-token loss instead (chunked_lm_loss: no full-batch logits)."""
        T = ids.shape[1]
        if T > self.cfg.max_seq_len:
            raise TrainingError(
                f"model: sequence of {T} tokens is longer than max_seq_len {self.cfg.max_seq_len}"
            )
        cos, sin = rope_cos_sin(T, self.cfg.head_dim, self.cfg.rope_theta, ids.device)
        x = self.tok_embeddings(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        h = self.norm(x)
        if targets is not None:
            return chunked_lm_loss(h, self.lm_head.weight, targets, self.cfg.vocab_size)
        return _widen(self.lm_head(h)[..., : self.cfg.vocab_size])

    def num_params(self, non_embedding: bool = False) -> int:
        """Parameters, the padding rows of the embedding/LM head left out; a tied matrix
        counts once (parameters() yields it once)."""
        pad = (self.cfg.padded_vocab_size - self.cfg.vocab_size) * self.cfg.d_model
        n = sum(p.numel() for p in self.parameters())
        n -= pad * (1 if self.cfg.tie_embeddings else 2)
        if non_embedding:
            n -= self.cfg.vocab_size * self.cfg.d_model * (1 if self.cfg.tie_embeddings else 2)
        return n


def _widen(logits: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 logits to float32 for the softmax; float32 and float64 stay as they are."""
    return logits.float() if logits.dtype in (torch.bfloat16, torch.float16) else logits


# The target that marks a position not scored (a held-out window's padding and skipped
# predictions): torch's cross_entropy default, left out of the loss's sum and of its count.
IGNORE_INDEX = -100


def lm_loss(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """Mean next-token cross-entropy in nats over the targets that are not ignore_index."""
    return F.cross_entropy(
        _widen(logits).reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
    )


# Tokens per cross-entropy chunk: 8192 x a 32k vocabulary is 1 GiB of float32 logits at a
# time, instead of 4 GiB for a 16 x 2048 batch (and 8 GiB at a 64k vocabulary).
CE_CHUNK_TOKENS = 8192


def _chunk_ce_sum(
    h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, vocab_size: int, ignore_index: int
) -> torch.Tensor:
    logits = _widen(F.linear(h, weight)[:, :vocab_size])
    return F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction="sum")


def chunked_lm_loss(
    h: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    vocab_size: int,
    ignore_index: int = IGNORE_INDEX,
    chunk: int = CE_CHUNK_TOKENS,
) -> torch.Tensor:
    """lm_loss(h @ weight[:vocab_size].T, targets) without the whole batch's logits: each
    chunk of tokens is projected, scored and dropped, and recomputed in the backward pass
    (activation checkpointing), so at most one chunk's float32 logits exist at a time."""

    h, targets = h.reshape(-1, h.shape[-1]), targets.reshape(-1)
    total = None
    for i in range(0, h.shape[0], chunk):
        args = (h[i : i + chunk], weight, targets[i : i + chunk], vocab_size, ignore_index)
        part = (
            checkpoint(_chunk_ce_sum, *args, use_reentrant=False)
            if h.shape[0] > chunk
            else _chunk_ce_sum(*args)
        )
        total = part if total is None else total + part
    assert total is not None
    return total / (targets != ignore_index).sum().clamp(min=1)


_SDPA_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}


@contextmanager
def attention_backend(name: str) -> Iterator[None]:
    """Pin scaled_dot_product_attention to one kernel: "auto" lets PyTorch choose the fused
    kernel, "math" is the plain reference, "flash"/"efficient"/"cudnn" force one kernel."""
    ctx: AbstractContextManager[object]
    if name == "auto":
        ctx = nullcontext()
    elif name in _SDPA_BACKENDS:
        ctx = sdpa_kernel(getattr(SDPBackend, _SDPA_BACKENDS[name]))
    else:
        raise TrainingError(
            f"attention backend {name!r} is unknown (known: auto, {', '.join(_SDPA_BACKENDS)})"
        )
    try:
        with ctx:
            yield
    except RuntimeError as e:
        # CUDA says "No available kernel", the CPU build "No viable backend".
        if "No available kernel" in str(e) or "No viable backend" in str(e):
            raise TrainingError(
                f"attention backend {name!r} cannot run these inputs on this device "
                f"(dtype/device/head size unsupported); use 'auto' or 'math'"
            ) from None
        raise


def hf_llama_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under LlamaForCausalLM's names, as save_pretrained writes them: with tied
    embeddings lm_head.weight is left out (HF re-ties it on load), so the dict goes straight
    into safetensors, which refuses tensors that share storage."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        if name in ("tok_embeddings.weight", "lm_head.weight"):
            tensor = tensor[: model.cfg.vocab_size]  # the padding rows are not part of the model
        if name == "lm_head.weight":
            if not model.cfg.tie_embeddings:
                out[name] = tensor
            continue
        name = name.replace("tok_embeddings.", "model.embed_tokens.")
        if name.startswith("layers."):
            name = "model." + name.replace(".attn.", ".self_attn.").replace(
                ".attn_norm.", ".input_layernorm."
            ).replace(".mlp_norm.", ".post_attention_layernorm.")
        elif name == "norm.weight":
            name = "model.norm.weight"
        out[name] = tensor
    return out


def hf_llama_config(cfg: ModelConfig) -> dict:
    """config.json content for LlamaForCausalLM with this model's shapes."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": cfg.tie_embeddings,
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": cfg.init_std,
        "torch_dtype": "float32",
    }


if __name__ == "__main__":  # prints the preset table quoted in the comment above PRESETS
    with torch.device("meta"):
        for preset in PRESETS:
            m = Transformer(config_from_preset(preset, 32000))
            print(f"{preset:6s} {m.num_params():>13,} / {m.num_params(True):>13,}")
