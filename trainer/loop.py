"""The training loop: AdamW, warmup + cosine, accumulation, clipping, checks, recovery.

One optimizer step = `accum` micro-batches per rank, their mean loss backpropagated (DDP
averages across ranks), the gradient norm clipped, then AdamW. A step whose loss or gradient
norm is not finite never reaches the optimizer: it is logged as skipped; `max_bad_steps` of
them in a row roll the run back to the last checkpoint (weights, optimizer, RNG) while the
data cursor stays where it is, so the batches that broke it are not read again.

Every step appends one JSON line to RUN_DIR/metrics.jsonl: step, loss, lr, grad_norm, tokens
(consumed so far), epoch (of the data order), languages (per language: chars, bytes and
tokens consumed so far; trainer/mix.py), tokens_per_s (all ranks), mfu (per device; null
on the CPU), skipped, and on a skipped step nonfinite ("loss" or "grad_norm"; loss and
grad_norm are then null). Events (resume, rollback, heldout, terminated) are lines with an
"event" key; {"event": "heldout", "step", "loss", "tokens", "documents", "train_loss",
"overfitting", "languages"} is the held-out loss every eval_every steps, per document as
`fertility eval` scores it (separator targets not counted; trainer.data.heldout_windows),
with each language's loss and bits per byte (heldout_loss), beside the mean
training loss of the steps since the previous one; `overfitting` is true when the held-out
loss is above its lowest so far while the training loss is below what it was then
(`overfitting()`: a one-line warning the first time, and run.json's `overfitting`).

Timing (#37): how long the checks before step 1 took (the arbiter, which on CUDA also
compiles the model for its compiled-vs-eager check) and how long the first step took (with
torch.compile, its compilation), each one line on stderr and in run.json's `timing`.

SIGTERM (a preemptible machine going away) stops the run at the end of the current step: it
is noted by a handler installed while training (the CLI's own raises at once, which could
land inside optimizer.step), that step is checkpointed, and fertility.errors.Terminated is
raised (exit 143). Ctrl-C stops at once without a checkpoint, as before: the last periodic
one is what --resume continues from.

On CUDA nothing reads the device per step: loss and gradient norm stay on the GPU and are
read every log_every steps (`sync_every`), a non-finite step is kept from the optimizer on
the device (fused AdamW's found_inf), and the lines are written when they are read.

`callbacks` (tests use them to poison or pause a run) may define on_step_start(step, model)
and on_step_end(step, record).
"""

from __future__ import annotations

import copy
import json
import math
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.distributed.fsdp import FSDPModule
from torch.nn.parallel import DistributedDataParallel as DDP

from fertility.errors import Terminated, TrainingError
from fertility.outputs import inside, open_inside, write_inside
from fertility.progress import StatusLine, meter_text
from fertility.trainer import checkpoint as ck
from fertility.trainer import distributed as D
from fertility.trainer.config import TrainConfig
from fertility.trainer.contract import check_contract
from fertility.trainer.data import TokenData, heldout_documents, heldout_windows
from fertility.trainer.mix import make_batches, record_consumed
from fertility.trainer.model import ModelConfig, Transformer
from fertility.trainer.rundir import METRICS, RunDir, read_run_json, write_run_json
from fertility.trainer.sinks import Sinks, open_sinks
from fertility.trainer.throughput import ThroughputMeter


def lr_at(step: int, cfg: TrainConfig, total_steps: int) -> float:
    """Learning rate of optimizer step `step` (1-based): linear warmup, cosine to min_lr."""
    if step <= cfg.warmup_steps:
        return cfg.lr * step / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps))
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1.0 + math.cos(math.pi * progress))


def make_optimizer(
    model: torch.nn.Module, cfg: TrainConfig, device: torch.device
) -> torch.optim.AdamW:
    # Matrices decay; norms (1-D) do not: decaying a gain towards 0 only fights the norm.
    params = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    if cfg.embedding_lr is not None:
        # The embedding matrix and the output head (one tensor when tied) in a group of their
        # own at embedding_lr / lr of the schedule's rate (train_step reads lr_scale). Whole
        # matrices, not the new rows alone: Adam divides each gradient by its own running
        # size, so a hook scaling the new rows' gradients would not change their step, and
        # splitting the matrix in two parameters would change the checkpoint, export and
        # FSDP layout. The anchor (docs/EXTEND.md) raises the whole embeddings and head too.
        raw: Any = model  # the Transformer (Trainer passes the unwrapped one)
        head = {id(raw.tok_embeddings.weight), id(raw.lm_head.weight)}
        groups[0]["params"] = [p for p in groups[0]["params"] if id(p) not in head]
        embed = [p for p in params if id(p) in head]
        groups.append(
            {
                "params": embed,
                "weight_decay": cfg.weight_decay,
                "lr_scale": cfg.embedding_lr / cfg.lr,
            }
        )
    # Fused on the CPU too: one kernel on both, and found_inf (a skip on the device) works.
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=True)


def amp_dtype(cfg: TrainConfig, device: torch.device) -> torch.dtype | None:
    """bf16 autocast on CUDA by default; float32 (no autocast) on the CPU."""
    if cfg.dtype == "bf16" or (cfg.dtype == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def _step_of(line: str) -> float:
    """The step of a metrics line; a line cut short by a kill counts as past every step."""
    try:
        return json.loads(line).get("step", 0)
    except ValueError:
        return math.inf


class Trainer:
    def __init__(
        self,
        run_dir: str | Path,
        cfg: TrainConfig,
        model_cfg: ModelConfig,
        data: TokenData,
        *,
        fingerprint: str,
        special_ids: dict[str, int] | None = None,
        env: D.DistEnv | None = None,
        quiet: bool = False,
        callbacks: Any = None,
        heldout: TokenData | None = None,
        init: Any = None,
    ) -> None:
        self.run_dir, self.cfg, self.model_cfg = Path(run_dir), cfg, model_cfg
        self.env = env or D.DistEnv()
        self.device = self.env.device
        self.fingerprint, self.special_ids = fingerprint, dict(special_ids or {})
        self.quiet, self.callbacks = quiet, callbacks
        self._clock = (time.monotonic(), 0)  # (start, step) of the ETA, set by run()
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        self.raw = Transformer(model_cfg).to(self.device)
        if init is not None:  # --init-from (trainer/init.py); a resume then loads its checkpoint
            init(self.raw)
        self.fsdp = D.use_fsdp(cfg.fsdp, self.raw.num_params(), self.env)
        wrapped = D.wrap_model(self.raw, self.env, self.fsdp, amp_dtype(cfg, self.device))
        self.ddp = wrapped if isinstance(wrapped, DDP) else None  # FSDP shards raw in place
        self.compiled = cfg.use_compile(self.device.type)
        self.model = torch.compile(wrapped) if self.compiled else wrapped
        self.optimizer = make_optimizer(self.raw, cfg, self.device)
        # each group's share of the schedule's lr, from this run's config (a checkpoint's
        # param_groups, loaded over these on resume, would bring back its own)
        self.lr_scales = [g.get("lr_scale", 1.0) for g in self.optimizer.param_groups]
        self.amp = amp_dtype(cfg, self.device)
        self.batches = make_batches(data, cfg, rank=self.env.rank, world=self.env.world_size)
        self.accum = cfg.accum_steps(self.env.world_size)
        self.step_tokens = cfg.step_tokens(self.env.world_size)
        self.total_steps = cfg.total_steps(data.n_tokens, self.env.world_size)
        self.step = 0
        self.saved_step: int | None = None
        self.tokens_seen = 0
        self.bad_in_row = 0
        self.skipped = 0
        self.rollbacks = 0
        self.last_loss: float | None = None
        self._train_losses: list[float] = []  # the finite losses since the last held-out pass
        self.heldout_history: list[dict[str, Any]] = []  # {step, heldout, train} per pass
        self.overfitting: dict[str, Any] | None = None  # the first pass overfitting() flagged
        self.timing: dict[str, float] = {}  # preflight_s, first_step_s (this process's run)
        self.metrics_path = RunDir(self.run_dir).metrics
        self.heldout = heldout
        self._heldout_windows: tuple[list, list[int], int, int] | None = None  # built once
        self._heldout_docs: tuple[list[int], list[tuple[str, int]]] = ([], [])
        # Reading a CPU tensor costs nothing; reading a GPU one waits for the queue to drain.
        self.sync_every = 1 if self.device.type == "cpu" else cfg.log_every
        self._pending: list[dict[str, Any]] = []  # steps whose loss is still on the device
        self._sigterm = False  # set by the handler of _stop_on_sigterm, read at step ends
        self.sinks = Sinks([])  # TensorBoard, W&B (cfg.log_to): opened by run()

    # -- callbacks, logging ---------------------------------------------------------------
    def _call(self, name: str, *args: Any) -> None:
        fn = getattr(self.callbacks, name, None)
        if fn is not None:
            fn(*args)

    def _write(self, record: dict[str, Any]) -> None:
        if self.env.is_main:
            # through fertility.outputs: a link at metrics.jsonl is refused, not followed
            with open_inside(self.run_dir, METRICS, error=TrainingError, append=True) as f:
                f.write(json.dumps(record) + "\n")
                f.flush()
            self.sinks.write(record)  # the same line, in the user's tools

    def _warn(self, message: str) -> None:
        D.log(self.env, f"warning: {message}")

    # -- checkpoints ----------------------------------------------------------------------
    def save(self) -> Path | None:
        weights, optim_state = D.full_state(self.raw, self.optimizer)  # collective under FSDP
        path = None
        if self.env.is_main:
            state = {
                "optimizer": optim_state,
                "scheduler": {
                    "name": "warmup_cosine",
                    "step": self.step,
                    "total_steps": self.total_steps,
                },
                "rng": ck.capture_rng(),
                "cursor": self.batches.state_dict(),
                "counters": {"skipped": self.skipped, "rollbacks": self.rollbacks},
            }
            manifest = {
                "tokens_seen": self.tokens_seen,
                "tokenizer_fingerprint": self.fingerprint,
                "config": self.cfg.to_dict(),
                "model": self.model_cfg.to_dict(),
                "world_size": self.env.world_size,
            }
            path = ck.save_checkpoint(
                self.run_dir, self.step, weights, state, manifest, self.cfg.keep_last
            )
            # So a run killed mid-way still says what it consumed up to its last checkpoint.
            run_json = RunDir(self.run_dir).run_json
            if run_json.exists():
                record_consumed(run_json, self.batches.consumed())
        D.barrier(self.env)
        self.saved_step = self.step
        return path

    def _load(self, path: Path, manifest: dict[str, Any], keep_cursor: bool) -> dict[str, Any]:
        """Weights, optimizer, RNG and counters from a checkpoint; returns its training state."""
        if manifest.get("tokenizer_fingerprint") != self.fingerprint:
            raise TrainingError(
                f"{path}: checkpoint was trained with tokenizer "
                f"{manifest.get('tokenizer_fingerprint')}, this run's is "
                f"{self.fingerprint}"
            )
        state = ck.load_train_state(path)
        groups = len(state["optimizer"].get("param_groups", ()))
        if groups and groups != len(self.optimizer.param_groups):  # embedding_lr set or unset
            raise TrainingError(
                f"{path}: the checkpoint's optimizer has {groups} parameter groups, this "
                f"run's {len(self.optimizer.param_groups)}: resume with embedding_lr as the "
                "run was started (set, or unset)"
            )
        D.load_full_state(self.raw, self.optimizer, ck.load_weights(path), state["optimizer"])
        ck.restore_rng(state["rng"])
        if not keep_cursor:
            self.batches.load_state_dict(state["cursor"])
        self.step = self.saved_step = int(manifest["step"])
        self.tokens_seen = int(manifest["tokens_seen"])
        if not keep_cursor:  # a resume; a rollback keeps counting skips and rollbacks
            self.skipped = int(state["counters"]["skipped"])
            self.rollbacks = int(state["counters"]["rollbacks"])
        return state

    def resume(self) -> bool:
        """Continue from the newest valid checkpoint; False when there is none."""
        if self.env.is_main:
            ck.remove_partial(self.run_dir)
        D.barrier(self.env)
        found = ck.latest_checkpoint(self.run_dir, warn=self._warn)
        if found is None:
            self._warn(f"{self.run_dir}: no valid checkpoint to resume from; starting afresh")
            return False
        path, manifest = found
        self._load(path, manifest, keep_cursor=False)
        if self.env.is_main and self.metrics_path.exists():
            # Steps after the checkpoint are redone identically: drop their old lines.
            lines = self.metrics_path.read_text(encoding="utf-8").splitlines(keepends=True)
            keep = [l for l in lines if _step_of(l) <= self.step]
            losses = [json.loads(l).get("loss") for l in keep]
            self.last_loss = next((x for x in reversed(losses) if x is not None), None)
            write_inside(self.run_dir, METRICS, "".join(keep), TrainingError)
        self._write({"event": "resume", "step": self.step, "checkpoint": path.name})
        D.log(self.env, f"resuming from {path} (step {self.step})")
        return True

    def rollback(self, bad_step: int) -> None:
        found = ck.latest_checkpoint(self.run_dir, warn=self._warn)
        if found is None:
            raise TrainingError(
                f"{self.run_dir}: {self.bad_in_row} non-finite steps in a row "
                f"(up to step {bad_step}) and no checkpoint to roll back to; "
                "lower lr or set a smaller checkpoint_every"
            )
        self.rollbacks += 1
        if self.rollbacks > self.cfg.max_rollbacks:
            raise TrainingError(
                f"{self.run_dir}: non-finite steps again after "
                f"{self.cfg.max_rollbacks} rollbacks (step {bad_step}); the run "
                "diverges - lower lr or raise warmup_steps"
            )
        path, manifest = found
        saved = self._load(path, manifest, keep_cursor=True)["cursor"]
        # The data cursor stays past the bad batches; say how many windows go unread.
        skipped = (
            (self.batches.epoch - saved["epoch"]) * self.batches.n_windows
            + self.batches.position
            - saved["position"]
        )
        self._write(
            {
                "event": "rollback",
                "step": bad_step,
                "to_step": self.step,
                "skipped_windows": int(skipped),
                "rollbacks": self.rollbacks,
            }
        )
        self._warn(
            f"{self.bad_in_row} non-finite steps in a row (up to step {bad_step}): "
            f"rolled back to {path.name}, skipping the {skipped} windows read since"
        )
        self.bad_in_row = 0

    # -- checks before the first step ----------------------------------------------------
    def preflight(self) -> Any:
        """The checks before step 1; returns the arbiter's report (TrainingError on a
        failure, on every rank)."""
        # deferred: looked up when called, so a test can replace it
        from fertility.trainer.arbiter import assert_arbiter

        vocab = self.model_cfg.vocab_size
        bad = {k: v for k, v in self.special_ids.items() if not 0 <= v < vocab}
        D.agree(
            not bad,
            f"tokenizer special ids {bad} are outside the model's vocabulary (size {vocab})",
            self.env,
        )
        x, y = self.batches.peek()
        # what the config trains, the run trains (trainer/contract.py): before the gradients
        check_contract(self.raw, self.optimizer, self.model_cfg, (x, y), self.env)
        rng = torch.get_rng_state()
        ok, message = True, ""
        try:
            # The raw module: the arbiter's backward must not trigger DDP's all-reduce. Without
            # a DDP wrapper the run's compiled module wraps that very module: compare it (and
            # reuse its compilation) rather than compile a second copy.
            compiled = self.model if self.compiled and self.ddp is None else self.compiled
            exact_on = copy.deepcopy(self.raw) if self.ddp is not None else None
            report = assert_arbiter(
                self.raw,
                x.to(self.device),
                y.to(self.device),
                compiled=compiled,
                amp_dtype=self.amp,
                exact_on=exact_on,
                step=(
                    "FSDP keeps the unsharded gradients inside its reduce-scatter (a DDP or "
                    "one-device run of the same model checks the step)"
                    if self.fsdp
                    else self._step_check
                ),
            )
        except TrainingError as e:
            ok, message, report = False, str(e), None
        torch.set_rng_state(rng)
        self.optimizer.zero_grad(set_to_none=True)
        D.agree(ok, message, self.env)
        if report is not None:
            self._record_arbiter(report)
        return report

    def _record_arbiter(self, report: Any) -> None:
        """The arbiter's verdict: one line on stderr, and run.json's `arbiter` record."""
        if not self.quiet:
            D.log(self.env, report.line())
        run_json = RunDir(self.run_dir).run_json
        if self.env.is_main and run_json.exists():
            record = read_run_json(run_json)
            record["arbiter"] = report.record()
            write_run_json(run_json, record, TrainingError)

    # -- one optimizer step ---------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        step = self.step + 1
        self._call("on_step_start", step, self.raw)
        lr = lr_at(step, self.cfg, self.total_steps)
        for group, scale in zip(self.optimizer.param_groups, self.lr_scales):
            group["lr"] = lr * scale
        micro_batches = (
            tuple(self._to_device(t) for t in self.batches.next()) for _ in range(self.accum)
        )
        loss_sum = self.accumulate(self.model, micro_batches)
        loss_t = D.all_reduce_mean(loss_sum / self.accum, self.env)
        norm_t = self.clip()
        self.step = step
        self.tokens_seen += self.step_tokens
        record = {
            "step": step,
            "loss": loss_t,
            "lr": lr,
            "grad_norm": norm_t,
            "tokens": self.tokens_seen,
            "epoch": self.batches.epoch,
            "languages": self.batches.consumed(),
        }
        if self.sync_every == 1:
            if not self._read(record)["skipped"]:
                self.optimizer.step()
        else:  # the optimizer skips a non-finite step on the device; nothing waits
            bad = ~(torch.isfinite(loss_t) & torch.isfinite(norm_t))
            # fused AdamW.step reads found_inf, which torch's stubs do not declare (its own
            # GradScaler sets it the same way, with the same ignore)
            self.optimizer.found_inf = bad.float().reshape(())  # type: ignore[attr-defined]
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return record

    def accumulate(
        self, module: Callable[..., torch.Tensor], micro_batches: Any, exact: bool = False
    ) -> torch.Tensor:
        """The step's gradients: each of the accum micro-batches' mean loss, divided by accum,
        backpropagated through `module` (the run's: compiled, DDP); DDP and FSDP reduce on
        the last backward only. Returns the micro-batches' summed losses (detached). The
        arbiter's step check runs this very code (preflight); `exact`: without autocast,
        for its float64 pass."""
        amp = None if exact else self.amp
        autocast = torch.autocast(self.device.type, dtype=amp) if amp else nullcontext()
        loss_sum = torch.zeros((), device=self.device)
        for micro, (x, y) in enumerate(micro_batches):
            last = micro == self.accum - 1  # gradients are reduced on the last backward only
            if self.ddp is not None:
                self.ddp.require_backward_grad_sync = last
            elif self.fsdp:
                raw = self.raw
                assert isinstance(raw, FSDPModule), "fully_shard made the model an FSDPModule"
                raw.set_requires_gradient_sync(last)
            with autocast:
                loss = module(x, y)
            (loss / self.accum).backward()
            loss_sum += loss.detach()
        return loss_sum

    def clip(self) -> torch.Tensor:
        """Clip the gradients at grad_clip (0: measure only); the norm before clipping."""
        clip = self.cfg.grad_clip if self.cfg.grad_clip > 0 else float("inf")
        norm_t = torch.nn.utils.clip_grad_norm_(self.raw.parameters(), clip)
        if hasattr(norm_t, "full_tensor"):  # FSDP: a DTensor
            norm_t = norm_t.full_tensor()
        return norm_t

    def _step_check(self) -> Any:
        """check_step on the run's own step: its next accum micro-batches (each cut to
        STEP_SEQS x STEP_TOKENS, the cursor put back), through accumulate() and clip(). One
        process: the model in float64; under DDP the wrapper in the run's dtype, the
        reference averaged by an all-reduce of our own."""
        from fertility.trainer import arbiter

        state = self.batches.state_dict()
        try:
            read = [self.batches.next() for _ in range(self.accum)]
        finally:
            self.batches.load_state_dict(state)
        cut = (slice(0, arbiter.STEP_SEQS), slice(0, arbiter.STEP_TOKENS))
        micro = [(self._to_device(x[cut]), self._to_device(y[cut])) for x, y in read]
        clip = self.cfg.grad_clip if self.cfg.grad_clip > 0 else math.inf
        if self.ddp is None:
            return arbiter.check_step(
                self.raw,
                micro,
                lambda mb: (self.accumulate(self.raw, mb, exact=True), self.clip())[1],
                clip=clip,
            )
        ddp = self.ddp
        return arbiter.check_step(
            self.raw,
            micro,
            lambda mb: (self.accumulate(ddp, mb), self.clip())[1],
            clip=clip,
            float64=False,
            amp_dtype=self.amp,
            reduce=lambda g: D.all_reduce_mean(g.detach(), self.env),
            tol=arbiter.TOL_LOW_PRECISION if self.amp is not None else arbiter.TOL_FP32,
        )

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        if self.device.type != "cuda":
            return t.to(self.device)
        # Pinned, so the copy runs asynchronously while the previous step still computes.
        return t.pin_memory().to(self.device, non_blocking=True)

    @staticmethod
    def _read(record: dict[str, Any]) -> dict[str, Any]:
        """A step record's device tensors as numbers (one transfer for both)."""
        loss, norm = (
            float(v)
            for v in torch.stack([record["loss"].float(), record["grad_norm"].float()]).cpu()
        )
        finite = math.isfinite(loss) and math.isfinite(norm)
        record.update(
            {
                "loss": loss if finite else None,
                "grad_norm": norm if math.isfinite(norm) else None,
                "skipped": not finite,
            }
        )
        if not finite:
            record["nonfinite"] = "loss" if not math.isfinite(loss) else "grad_norm"
        return record

    @torch.no_grad()
    def heldout_loss(self) -> tuple[float, int, int, dict[str, dict[str, float | None]]] | None:
        """(nats per scored token, scored tokens, documents, languages) on the first held-out
        documents up to eval_windows x seq_len tokens, the same ones every time, scored as
        `fertility eval` scores a document (trainer.data.heldout_windows). `languages`:
        {lang: {loss, tokens, bytes, bits_per_byte}} over each language's documents among
        them (heldout.jsonl beside the shards says which and their UTF-8 bytes; {} without
        it or without a separator). The eager module: the compiled one would compile again
        for no_grad."""
        if self.heldout is None:
            return None
        T = self.cfg.resolved_seq_len
        if self._heldout_windows is None:
            owners: list[int] = []
            self._heldout_windows = heldout_windows(
                self.heldout.tokens, self.heldout.separator, T, self.cfg.eval_windows * T, owners
            )
            self._heldout_docs = (owners, heldout_documents(self.heldout, self._heldout_windows[2]))
        windows, skips, docs, n_tokens = self._heldout_windows
        if not windows:
            return None
        # Windows padded to T+1; padding and the predictions a window skips are ignored
        # targets (-100). Padding sits after a window's tokens: causal attention keeps it
        # from changing any scored position.
        w = torch.zeros((len(windows), T + 1), dtype=torch.int64)
        y = torch.full((len(windows), T), -100, dtype=torch.int64)
        for i, (win, k) in enumerate(zip(windows, skips)):
            w[i, : len(win)] = torch.from_numpy(win)
            y[i, k : len(win) - 1] = w[i, k + 1 : len(win)]
        owners, meta = self._heldout_docs
        # one language's windows at a time (all of them as one when languages are unknown)
        groups: dict[str, list[int]] = {}
        for i, doc in enumerate(owners if meta else []):
            groups.setdefault(meta[doc][0], []).append(i)
        nats = {lang: self._nats(w[rows], y[rows]) for lang, rows in groups.items()}
        total = sum(nats.values()) if meta else self._nats(w, y)
        languages = {}
        for lang, rows in groups.items():
            scored = int((y[rows] != -100).sum())
            size = sum(meta[d][1] for d in sorted({owners[i] for i in rows}))
            languages[lang] = {
                "loss": nats[lang] / scored,
                "tokens": scored,
                "bytes": size,
                "bits_per_byte": nats[lang] / math.log(2) / size if size else None,
            }
        return total / n_tokens, n_tokens, docs, languages

    def _nats(self, w: torch.Tensor, y: torch.Tensor) -> float:
        """Summed next-token loss of windows `w` (padded to T+1) on targets `y` (-100:
        not scored), micro_batch windows at a time."""
        autocast = torch.autocast(self.device.type, dtype=self.amp) if self.amp else nullcontext()
        total = torch.zeros((), device=self.device, dtype=torch.float64)
        for i in range(0, len(w), self.cfg.micro_batch):
            x, t = (
                self._to_device(w[i : i + self.cfg.micro_batch, :-1]),
                self._to_device(y[i : i + self.cfg.micro_batch]),
            )
            with autocast:
                mean = self.raw(x, t).double()
            total += mean * (t != -100).sum()
        return float(total)

    def _flush(self, meter: Any, local_tokens: int, status: StatusLine) -> bool:
        """Read and write the pending steps' lines; True when they forced a rollback."""
        pending, self._pending = self._pending, []
        speed = meter.step(local_tokens * len(pending))  # one interval, one sync
        for record in pending:
            if "skipped" not in record:
                self._read(record)
            record["tokens_per_s"] = speed["tokens_per_s"] * self.env.world_size
            record["mfu"] = speed["mfu"]
            self._write(record)
            self._call("on_step_end", record["step"], record)
            if record["skipped"]:
                self.skipped += 1
                self.bad_in_row += 1
                self._warn(
                    f"step {record['step']}: non-finite {record['nonfinite']}; step "
                    f"skipped ({self.bad_in_row} in a row)"
                )
                if self.bad_in_row >= self.cfg.max_bad_steps:
                    self.rollback(record["step"])
                    return True
                continue
            self.bad_in_row = 0
            self.last_loss = record["loss"]
            self._train_losses.append(record["loss"])
        last = pending[-1]
        if not last["skipped"] and (
            self.step % self.cfg.log_every == 0 or self.step == self.total_steps
        ):
            mfu = "" if last["mfu"] is None else f"  mfu {last['mfu']:.1%}"
            t_start, s_start = self._clock
            eta = meter_text(
                self.step - s_start, self.total_steps - s_start, time.monotonic() - t_start
            )
            status.update(
                f"step {self.step}/{self.total_steps}{f' ({eta})' if eta else ''}  "
                f"loss {last['loss']:.4f}  "
                f"lr {last['lr']:.2e}  {last['tokens_per_s']:,.0f} tok/s{mfu}",
                force=True,
            )
        return False

    # -- timing, held-out passes ----------------------------------------------------------
    def _first_step_done(self, t_step: float) -> None:
        """The first step's time, read once the device has finished it (one sync, once)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.timing["first_step_s"] = time.monotonic() - t_step
        what = "torch.compile's compilation included" if self.compiled else "eager"
        if not self.quiet:
            D.log(
                self.env,
                f"timing: checks before step 1 (arbiter) {self.timing['preflight_s']:.1f} s",
            )
            D.log(self.env, f"timing: first step {self.timing['first_step_s']:.1f} s ({what})")
        self._update_run_json("timing", dict(self.timing))

    def _update_run_json(self, key: str, value: Any) -> None:
        run_json = RunDir(self.run_dir).run_json
        if self.env.is_main and run_json.exists():
            record = read_run_json(run_json)
            record[key] = value
            write_run_json(run_json, record, TrainingError)

    def _heldout_event(self) -> None:
        """The held-out loss beside the training loss since the last pass; overfitting noted."""
        held = self.heldout_loss()
        if held is None:
            return
        losses, self._train_losses = self._train_losses, []
        train = sum(losses) / len(losses) if losses else None
        self.heldout_history.append({"step": self.step, "heldout": held[0], "train": train})
        warning = overfitting(self.heldout_history)
        if warning is not None and self.overfitting is None:
            self._warn(warning)
            self.overfitting = {"step": self.step, "message": warning}
            self._update_run_json("overfitting", self.overfitting)
        self._write(
            {
                "event": "heldout",
                "step": self.step,
                "loss": held[0],
                "tokens": held[1],
                "documents": held[2],
                "train_loss": train,
                "overfitting": warning is not None,
                "languages": held[3],
            }
        )

    # -- SIGTERM: stop at a step boundary with a checkpoint -------------------------------
    @contextmanager
    def _stop_on_sigterm(self):
        """While training, SIGTERM only sets a flag; the caller's handler is restored after."""
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be set from the main thread
            return

        def note(signum: int, frame: Any) -> None:
            self._sigterm = True

        previous = signal.signal(signal.SIGTERM, note)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _stop_agreed(self, due: bool) -> bool:
        """SIGTERM seen on any rank. Saving is collective, so every rank must stop at the same
        step: ranks compare flags only at steps where they sync anyway (`due`)."""
        if not self.env.enabled:
            return self._sigterm
        if not due:
            return False
        flag = torch.tensor([float(self._sigterm)], device=self.device)
        return bool(D.all_reduce_mean(flag, self.env).item() > 0)

    def _terminate(self, meter: Any, local_tokens: int, status: StatusLine) -> None:
        """Checkpoint the step just finished, then raise Terminated (exit 143)."""

        if self._pending:
            self._flush(meter, local_tokens, status)  # a rollback here leaves step == saved
        if self.saved_step != self.step:
            self.save()
        self._write({"event": "terminated", "step": self.step})
        D.log(
            self.env,
            f"terminated: checkpoint at step {self.step} in "
            f"{ck.step_dir(self.run_dir, self.step)}; --resume continues it",
        )
        raise Terminated()

    # -- the run --------------------------------------------------------------------------
    def run(self, resume: bool = False) -> dict[str, Any]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            self.resume()
        elif self.env.is_main:
            inside(self.run_dir, METRICS, TrainingError).unlink(missing_ok=True)
        if self.cfg.warmup_steps >= self.total_steps:
            self._warn(
                f"warmup_steps {self.cfg.warmup_steps} >= the run's {self.total_steps} "
                "steps: the learning rate never reaches lr"
            )
        t_checks = time.monotonic()
        self.preflight()
        self.timing["preflight_s"] = time.monotonic() - t_checks
        local_tokens = self.step_tokens // self.env.world_size
        meter = ThroughputMeter(
            self.model_cfg,
            self.cfg.resolved_seq_len,
            self.device,
            warn=self._warn if self.env.is_main else (lambda m: None),
        )
        status = StatusLine(self.quiet or not self.env.is_main)
        t0 = time.monotonic()
        self._clock = (t0, self.step)  # the ETA's rate: this process's steps so far
        path = None
        if self.env.is_main and self.cfg.log_to:
            self.sinks = open_sinks(self.cfg.log_to, self.run_dir, self.step, self.cfg.to_dict())
        try:
            with self._stop_on_sigterm():
                path = self._train(meter, local_tokens, status)
        finally:
            self.sinks.close()
        return {
            "run_dir": str(self.run_dir),
            "steps": self.step,
            "tokens": self.tokens_seen,
            "final_loss": self.last_loss,
            "skipped_steps": self.skipped,
            "rollbacks": self.rollbacks,
            "elapsed_s": time.monotonic() - t0,
            "checkpoint": str(path) if path else None,
            "languages": self.batches.consumed(),
            "params": self.raw.num_params(),
            "timing": dict(self.timing),
            "overfitting": self.overfitting,
        }

    def _train(self, meter: Any, local_tokens: int, status: StatusLine) -> Path | None:
        """Steps until the run's length; the path of the checkpoint holding the result."""
        path = None
        try:
            while self.step < self.total_steps:
                t_step = time.monotonic()
                self._pending.append(self.train_step())
                if "first_step_s" not in self.timing:
                    self._first_step_done(t_step)
                due = (
                    self.step % self.sync_every == 0
                    or self.step == self.total_steps
                    or self.step % self.cfg.checkpoint_every == 0
                )
                if due and self._flush(meter, local_tokens, status):
                    continue  # rolled back: the run goes on from the checkpoint's step
                if self.cfg.eval_every and self.step % self.cfg.eval_every == 0:
                    # the held-out pass reads the device anyway: read the steps before it
                    if self._pending and self._flush(meter, local_tokens, status):
                        continue
                    self._heldout_event()
                if self.step % self.cfg.checkpoint_every == 0:
                    path = self.save()
                if self._stop_agreed(due):
                    self._terminate(meter, local_tokens, status)
            if self.saved_step != self.step:  # the final weights, whatever the period
                path = self.save()
            elif path is None:  # resumed a finished run: its last checkpoint is the result
                path = ck.step_dir(self.run_dir, self.step)
            if self._stop_agreed(True):  # during the last save: saved, but still a stop
                self._terminate(meter, local_tokens, status)
        finally:
            status.close()
        return path


def overfitting(history: list[dict[str, Any]]) -> str | None:
    """The warning when the latest held-out pass overfits, else None. `history`: one dict per
    pass, {"step", "heldout", "train"} (held-out loss; mean training loss of the steps since
    the pass before, None when none was finite).

    Overfitting: the held-out loss is above its lowest earlier value while the training loss
    is below its value at that lowest pass. Both losses are means over many tokens (the same
    held-out windows at every pass), so a rise is the model's, not the sample's; a held-out
    loss that rises with the training loss is a learning rate problem, not overfitting."""
    if len(history) < 2:
        return None
    last, best = history[-1], min(history[:-1], key=lambda h: h["heldout"])
    if last["train"] is None or best["train"] is None:
        return None
    if last["heldout"] > best["heldout"] and last["train"] < best["train"]:
        return (
            f"overfitting: at step {last['step']} the held-out loss {last['heldout']:.4f} is "
            f"above its lowest, {best['heldout']:.4f} at step {best['step']}, while the "
            f"training loss fell from {best['train']:.4f} to {last['train']:.4f}"
        )
    return None


def train(
    run_dir: str | Path,
    cfg: TrainConfig,
    model_cfg: ModelConfig,
    data: TokenData,
    *,
    fingerprint: str,
    resume: bool = False,
    **kw: Any,
) -> dict[str, Any]:
    """Build a Trainer and run it to cfg's length; returns the summary dict."""
    return Trainer(run_dir, cfg, model_cfg, data, fingerprint=fingerprint, **kw).run(resume)
