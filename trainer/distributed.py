"""Data parallelism: one process per device under `torchrun`, DDP or FSDP2.

Outside torchrun (no RANK/WORLD_SIZE in the environment) everything here is a no-op and the
run is a single process. Under torchrun each process finds its rank in the environment,
joins the process group (NCCL on CUDA, gloo on the CPU) and wraps the model: DDP when a
whole replica fits on each device, FSDP2 (`fully_shard`, parameters, gradients and optimizer
state sharded across ranks) when it would not, or when the config asks for it.
Only rank 0 writes files; every rank reads.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from fertility.errors import TrainingError


@dataclass
class DistEnv:
    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    backend: str | None = None  # None: not distributed
    owns_group: bool = False  # we initialised the process group, so we tear it down

    @property
    def enabled(self) -> bool:
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def resolve_device(pref: str, local_rank: int = 0) -> torch.device:
    """ "auto" takes CUDA when present; "cuda" without a GPU is an error, not a silent CPU run."""
    if pref == "auto":
        pref = "cuda" if torch.cuda.is_available() else "cpu"
    if pref.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TrainingError(f"device {pref!r} requested but no CUDA device is available")
        return torch.device(pref if ":" in pref else f"cuda:{local_rank}")
    return torch.device("cpu")


def launched_by_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_distributed(device: str = "auto") -> DistEnv:
    """Join the process group when launched by torchrun; otherwise a single-process env."""
    if not launched_by_torchrun():
        return DistEnv(device=resolve_device(device))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = resolve_device(device, local)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    owns = not dist.is_initialized()
    if owns:
        try:
            dist.init_process_group(backend, rank=rank, world_size=world)
        except Exception as e:  # noqa: BLE001 - a rendezvous failure is a user setup problem
            raise TrainingError(f"rank {rank}: cannot join the process group ({e})") from None
    return DistEnv(rank=rank, world_size=world, device=dev, backend=backend, owns_group=owns)


def shutdown(env: DistEnv) -> None:
    if env.enabled and env.owns_group and dist.is_initialized():
        dist.destroy_process_group()


def barrier(env: DistEnv) -> None:
    if env.enabled:
        dist.barrier()


def all_reduce_mean(t: torch.Tensor, env: DistEnv) -> torch.Tensor:
    if env.enabled:
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t /= env.world_size
    return t


def agree(ok: bool, message: str, env: DistEnv) -> None:
    """Raise TrainingError on every rank when any rank is not ok (so none hangs waiting).

    The message of the first failing rank is shown; ranks exchange only a flag and the
    text, never a pickled object.
    """
    if not env.enabled:
        if not ok:
            raise TrainingError(message)
        return
    flag = torch.tensor([0 if ok else 1], device=_comm_device(env))
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item() == 0:
        return
    # Send the lowest failing rank's message to everyone, as UTF-8 bytes in a tensor.
    who = torch.tensor([env.rank if not ok else env.world_size], device=flag.device)
    dist.all_reduce(who, op=dist.ReduceOp.MIN)
    src = int(who.item())
    data = message.encode()[:4096] if env.rank == src else b""
    length = torch.tensor([len(data)], device=flag.device)
    dist.broadcast(length, src)
    buf = torch.zeros(int(length.item()), dtype=torch.uint8, device=flag.device)
    if env.rank == src:
        buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    dist.broadcast(buf, src)
    text = bytes(buf.cpu().tolist()).decode(errors="replace")
    raise TrainingError(text if env.rank == src else f"rank {src}: {text}")


def _comm_device(env: DistEnv) -> torch.device:
    return env.device if env.backend == "nccl" else torch.device("cpu")


def estimated_train_bytes(n_params: int) -> int:
    """fp32 weights + grads + two AdamW moments (16 bytes per parameter); activations extra."""
    return 16 * n_params


def use_fsdp(setting: bool | str, n_params: int, env: DistEnv) -> bool:
    """FSDP when asked, or ("auto") when one device cannot hold weights, grads and optimizer
    state with half its memory left for activations. Needs a process group."""
    if setting is True:
        if not env.enabled:
            raise TrainingError("fsdp = true needs a distributed launch (torchrun)")
        return True
    if setting is False or not env.enabled or env.device.type != "cuda":
        return False
    total = torch.cuda.get_device_properties(env.device).total_memory
    return estimated_train_bytes(n_params) > total // 2


def wrap_model(
    model: nn.Module, env: DistEnv, fsdp: bool, param_dtype: torch.dtype | None = None
) -> nn.Module:
    """The module to call for training. With FSDP `model` itself is sharded in place (so it
    stays the one to pass to the optimizer and state-dict helpers); DDP returns a wrapper.

    `param_dtype` (the run's autocast dtype, bf16 on CUDA): FSDP2 gathers the parameters in
    that dtype for forward and backward, half the all-gather traffic and memory of float32,
    and reduce-scatters the gradients in float32, so the sharded float32 master weights and
    AdamW see gradients summed at full precision. Under autocast the matmuls run in bf16
    either way; without a policy FSDP2 would gather and reduce float32."""
    if not env.enabled:
        return model
    if fsdp:
        mp = (
            MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
            if param_dtype is not None
            else MixedPrecisionPolicy()
        )
        for block in getattr(model, "layers", []):
            fully_shard(block, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        return model

    ids = [env.device.index] if env.device.type == "cuda" else None
    return DDP(model, device_ids=ids)


def full_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Unsharded model and optimizer state dicts (keyed by parameter name, so a checkpoint
    loads into any world size); a collective under FSDP, so every rank must call it."""

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_state_dict(model, optimizer, options=opts)


def load_full_state(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    weights: dict[str, Any],
    optim_state: dict[str, Any] | None,
) -> None:
    opts = StateDictOptions(full_state_dict=True, strict=True)
    try:
        if optimizer is None or optim_state is None:
            set_model_state_dict(model, weights, options=opts)
        else:
            set_state_dict(
                model,
                optimizer,
                model_state_dict=weights,
                optim_state_dict=optim_state,
                options=opts,
            )
    except (RuntimeError, KeyError, ValueError) as e:
        raise TrainingError(f"checkpoint does not fit this model/optimizer ({e})") from None


def log(env: DistEnv, message: str) -> None:
    """A message on stderr from rank 0 only (one line per event, not one per rank)."""
    if env.is_main:
        print(message, file=sys.stderr, flush=True)
