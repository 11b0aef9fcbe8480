"""The training contract: what the run's config says is trained, the run's objects must train.

Checked by `Trainer.preflight` before the arbiter and before step 1; a breach is one line naming
the parameter (TrainingError, exit 2), on every rank. Each breach below trains silently
otherwise: the gradient-flow arbiter checks the gradients, not who reads them.

- Every parameter is trained: no TrainConfig key freezes one (a run from scratch, continued
  pretraining with --init-from, embedding_lr all train every weight), so each must have
  requires_grad=True. A frozen one would keep its initial value for the whole run.
- Every trainable parameter is in an optimizer group, compared by identity, and the
  optimizer holds nothing else: a parameter in no group gets gradients and never moves.
- `tie_embeddings`: the LM head's weight is the embedding's Parameter itself (one tensor, one
  gradient, one AdamW state); untied, they share no storage. A copy would drift apart from
  step 1 while the checkpoint and export say they are one.
- The loss is the mean over the targets that are not IGNORE_INDEX (the held-out windows'
  padding and skipped predictions) and over the model's vocab_size, not its padded rows: the
  run's own loss on a real batch with about half its targets marked ignored, against float64
  cross-entropy worked from the same final hidden states over the kept targets only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule

from fertility.errors import TrainingError, one_line
from fertility.trainer import distributed as D
from fertility.trainer.model import IGNORE_INDEX, ModelConfig

# The loss check's batch: the run's next micro-batch cut to this many sequences and positions
# (a forward pass of 2 x 64 tokens costs nothing next to the arbiter's).
LOSS_SEQS, LOSS_TOKENS = 2, 64
# Relative tolerance of the run's loss against the float64 reference. Error analysis: the
# run's loss comes from the same hidden states through float32 matmuls (TF32 or bf16 ones on
# CUDA, rounding at 2^-11 or 2^-9 per logit, averaged down over the positions), so it should
# sit within ~1e-3 of float64; measured at most 4e-8 on the CPU in float32 (tiny and small
# presets). A breach is far larger: the mask ignores at least a third of the positions
# (_ignored_mask), so a mean over every position is at least 33% low, and scoring the padded
# vocabulary rows moves the loss by up to ln(padded / vocab_size) nats (17% on the tiny preset
# at 64 ids).
LOSS_TOL = 1e-2


def check_contract(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    model_cfg: ModelConfig,
    batch: tuple[torch.Tensor, torch.Tensor],
    env: D.DistEnv | None = None,
) -> None:
    """TrainingError (on every rank) naming the first parameter that breaks the contract.
    `model` is the unwrapped Transformer the optimizer was made for; `batch` the run's next
    (ids, targets) micro-batch."""
    ok, message = True, ""
    try:
        _check_parameters(model, optimizer)
        _check_tie(model, model_cfg)
        _check_loss(model, model_cfg, batch)
    except TrainingError as e:
        ok, message = False, str(e)
    # Every rank reaches this line (the checks above read the same structure on every rank,
    # and the loss forward is taken by all or none), so none waits on another's collective.
    D.agree(ok, message, env or D.DistEnv())


def _breach(names: list[str], what: str) -> TrainingError:
    more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
    return TrainingError(f"training contract: parameter {names[0]}{more} {what}")


def _check_parameters(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    params = list(model.named_parameters())  # a tied matrix once, under its first name
    frozen = [n for n, p in params if not p.requires_grad]
    if frozen:
        raise _breach(
            frozen,
            "is frozen (requires_grad=False), but the config trains every parameter: it "
            "would keep its initial value for the whole run",
        )
    groups: dict[int, list[int]] = {}
    for i, group in enumerate(optimizer.param_groups):
        for p in group["params"]:
            groups.setdefault(id(p), []).append(i)
    missing = [n for n, p in params if id(p) not in groups]
    if missing:
        raise _breach(
            missing,
            f"is trainable but in none of the optimizer's {len(optimizer.param_groups)} "
            "parameter groups: it would get gradients and never change",
        )
    # (torch's add_param_group refuses a parameter in two groups: no check of ours needed)
    ours = {id(p) for _, p in params}
    stray = [
        i
        for i, group in enumerate(optimizer.param_groups)
        for p in group["params"]
        if id(p) not in ours
    ]
    if stray:
        raise TrainingError(
            f"training contract: optimizer group {stray[0]} holds a tensor that is not one "
            "of the model's parameters (an optimizer made for another copy of the model?)"
        )


def _local(p: torch.Tensor) -> torch.Tensor:
    """A parameter's own storage (under FSDP2 the rank's shard of the DTensor)."""
    to_local = getattr(p, "to_local", None)
    return to_local() if to_local is not None else p


def _check_tie(model: Any, model_cfg: ModelConfig) -> None:
    head, embed = model.lm_head.weight, model.tok_embeddings.weight
    if model_cfg.tie_embeddings and head is not embed:
        raise _breach(
            ["lm_head.weight"],
            "is a separate tensor, but the model config ties it to tok_embeddings.weight "
            "(tie_embeddings = true): the two would train apart",
        )
    if not model_cfg.tie_embeddings and (
        head is embed or _local(head).data_ptr() == _local(embed).data_ptr()
    ):
        raise _breach(
            ["lm_head.weight"],
            "is tok_embeddings.weight's tensor, but the model config does not tie them "
            "(tie_embeddings = false)",
        )


def _ignored_mask(targets: torch.Tensor) -> torch.Tensor:
    """Positions to mark ignored: every third one from position 1 (a window's skipped
    predictions), and in the first sequence its last half as well (a padded tail). At least a
    third of the positions of a sequence of 3 or more; position 0 is always kept."""
    T = targets.shape[1]
    mask = (torch.arange(T, device=targets.device) % 3 == 1).expand_as(targets).clone()
    mask[0, T - T // 2 :] = True
    return mask


@torch.no_grad()
def _check_loss(
    model: Any, model_cfg: ModelConfig, batch: tuple[torch.Tensor, torch.Tensor]
) -> None:
    device = next(model.parameters()).device
    ids, targets = (t[:LOSS_SEQS, :LOSS_TOKENS].to(device) for t in batch)
    targets = targets.masked_fill(_ignored_mask(targets), IGNORE_INDEX)
    seen: list[torch.Tensor] = []
    # The final hidden states the loss is computed from: the reference starts where it does.
    hook = model.norm.register_forward_hook(lambda m, a, out: seen.append(out))
    try:
        loss = model(ids, targets)
    except (RuntimeError, IndexError) as e:  # e.g. a loss that does not skip IGNORE_INDEX
        raise TrainingError(
            f"training contract: the loss fails on targets marked ignored ({IGNORE_INDEX}): "
            f"{one_line(e)}"
        ) from None
    finally:
        hook.remove()
    weight = model.lm_head.weight
    weight = weight.full_tensor() if hasattr(weight, "full_tensor") else weight  # FSDP2
    weight = weight[: model_cfg.vocab_size].double()
    for module in model.modules():
        # FSDP2 leaves the root's parameters gathered after a forward (it expects the
        # backward next): sharded again, so the arbiter's backward sees the run's parameters.
        if isinstance(module, FSDPModule):
            module.reshard()
    h = seen[-1].reshape(-1, seen[-1].shape[-1]).double()
    logits = h @ weight.T
    t = targets.reshape(-1)
    kept = t != IGNORE_INDEX
    ref = -(logits[kept].log_softmax(-1).gather(1, t[kept, None])).mean()
    got = float(loss)
    if not abs(got - float(ref)) <= LOSS_TOL * abs(float(ref)):
        n = int(kept.sum())
        raise TrainingError(
            f"training contract: the loss is {got:.6g} on a batch whose {t.numel() - n} of "
            f"{t.numel()} targets are marked ignored ({IGNORE_INDEX}), but the mean "
            f"cross-entropy over its {n} kept targets and {model_cfg.vocab_size} ids is "
            f"{float(ref):.6g} (float64): the loss counts ignored positions or padded "
            "vocabulary rows"
        )
