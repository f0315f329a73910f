"""The reference GRPO loop: roll out with the current policy, compute advantages, update, sync, repeat.

One step:

1. **Rollout** (``agentenvs.rollout``): ``groups_per_step`` tasks, each played ``group_size`` times from
   the same seed by the current policy (in-process transformers, or a vLLM server), as episode records
   with token ids, sampled logprobs and masks.
2. **Advantages** (:mod:`agentenvs.train.advantages`): one value per turn; episodes that infrastructure
   broke are dropped, and with ``filter_zero_variance`` so are groups whose members all scored alike.
3. **Update**: ``epochs`` passes over the rows (one per episode turn) in ``mini_batches`` optimizer
   steps, each accumulated over micro-batches of ``micro_batch_size`` rows, with the loss of
   :mod:`agentenvs.train.losses`. Old log-probabilities are recomputed by the trainer (so a sampler
   that differs numerically, like vLLM, never biases the ratio); with one epoch and one mini-batch
   the ratio is exactly 1 and they come free from the same forward pass.
4. **Sync**: in-process the policy shares the trained module, so nothing moves; with vLLM the adapter
   (or the whole model) is pushed to the server (:mod:`agentenvs.train.vllm_sync`).

Checkpoints (``<out>/checkpoints/step-N``) hold the weights (or adapter), the optimizer and the step;
a run started again with the same ``out`` resumes from the last one.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord
from agentenvs.seeding import derive_seed
from agentenvs.train import advantages as adv
from agentenvs.train.batching import Row, chunks, collate, response_logits, rows_from_records, token_logprobs
from agentenvs.train.config import TrainConfig
from agentenvs.train.losses import entropy_from_logits, policy_loss
from agentenvs.train.metrics import CURVES_FILE, MetricsLog, episode_metrics, plot_curves
from agentenvs.train.modeling import Reference, load_model, save_model, trainable_parameters

CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.json"


def latest_checkpoint(out: str | Path) -> Path | None:
    """The newest ``step-N`` folder under ``<out>/checkpoints`` that was completely written."""
    root = Path(out) / CHECKPOINTS
    done = [p for p in root.glob("step-*") if (p / STATE_FILE).is_file()] if root.is_dir() else []
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


class Trainer:
    """GRPO (and Dr.GRPO, RLOO, GiGPO) on agentenvs environments; see the module docstring."""

    def __init__(self, config: TrainConfig, *, resume: bool = True):
        import torch

        self.config = config.validate()
        run = config.run
        if run.torch_threads:
            torch.set_num_threads(run.torch_threads)
        torch.manual_seed(run.seed)
        self.out = Path(run.out)
        self.out.mkdir(parents=True, exist_ok=True)
        if config.env.entry_point:
            from agentenvs.registry import register

            register(config.env.name, config.env.entry_point, overwrite=True)
        checkpoint = latest_checkpoint(self.out) if resume else None
        self.step = 0
        self.warmed = False
        self._eval_policy = None
        self._env = None
        self._tasks: dict[str, list[str] | None] = {}
        self.model, self.tokenizer = load_model(config.model, seed=run.seed, checkpoint=checkpoint)
        self.device = next(self.model.parameters()).device
        self.optimizer = torch.optim.AdamW(
            trainable_parameters(self.model),
            lr=config.optim.lr,
            betas=tuple(config.optim.betas),
            weight_decay=config.optim.weight_decay,
        )
        self.reference = Reference(self.model, config.model.lora) if config.loss.kl_coef > 0 else None
        self.log = MetricsLog(self.out)
        if checkpoint is not None:
            self._restore(checkpoint)
        elif not resume:
            self.log.path.unlink(missing_ok=True)
        (self.out / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n", encoding="utf-8")
        self.sync = None
        if config.vllm.url:
            from agentenvs.train.vllm_sync import VLLMSync

            self.sync = VLLMSync(config.vllm, self.out)
        self.policy = self._make_policy(config.rollout.temperature)
        if self.sync is not None and (self.step > 0 or config.model.lora):
            self._push_weights()

    # ------------------------------------------------------------------ policies and rollouts

    def _make_policy(self, temperature: float) -> Any:
        from agentenvs.rollout.llm import Sampling
        from agentenvs.rollout.prompting import HistoryConfig

        settings = self.config.rollout
        sampling = Sampling(
            temperature=temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_tokens,
            stop=tuple(settings.stop),
        )
        history = HistoryConfig.parse(settings.history)
        if self.config.vllm.url:
            from agentenvs.rollout.openai_policy import OpenAIPolicy

            return OpenAIPolicy(
                self.config.vllm.url,
                self.sync.served_model if self.sync is not None else self.config.vllm.model,
                mode="completions",
                tokenizer=self.tokenizer,
                sampling=sampling,
                history=history,
                seed=self.config.run.seed,
                timeout_s=self.config.vllm.timeout_s,
            )
        from agentenvs.rollout.hf_policy import TransformersPolicy

        return TransformersPolicy(
            self.model,
            self.tokenizer,
            device=str(self.device),
            sampling=sampling,
            history=history,
            seed=self.config.run.seed,
            batch_size=settings.batch_size,
        )

    def rollout(
        self, step: int, *, split: str | None = None, groups: int | None = None, group_size: int | None = None
    ) -> list[EpisodeRecord]:
        """The episodes of ``step``: tasks shuffled by (run seed, step), each played ``group_size`` times."""
        from agentenvs.rollout.driver import RolloutConfig, plan_episodes, run_rollouts, task_ids

        env = self.config.env
        settings = self.config.rollout
        split = split or env.split
        if split not in self._tasks:
            self._tasks[split] = env.tasks or task_ids(env.name, split, self.local_env())
        tasks = self._tasks[split]
        episodes = plan_episodes(
            env.name,
            split,
            groups or settings.groups_per_step,
            group_size or settings.group_size,
            seed=derive_seed("train", self.config.run.seed, split, step) % (2**31),
            tasks=tasks,
            shuffle=True,
        )
        self.model.eval()
        return run_rollouts(
            env.name,
            self.policy,
            episodes=episodes,
            servers=env.servers,
            config=RolloutConfig(
                concurrency=settings.concurrency,
                time_limit_s=settings.time_limit_s,
                max_turns=env.max_turns,
                env_kwargs=dict(env.kwargs),
                progress=False,
            ),
        )

    def local_env(self) -> Any:
        """An in-process instance of the environment (for its task list and description), made once."""
        if self.config.env.servers:
            return None
        if self._env is None:
            from agentenvs.registry import make

            self._env = make(self.config.env.name, **self.config.env.kwargs)
        return self._env

    # ------------------------------------------------------------------ one step

    def advantages(self, records: Sequence[EpisodeRecord]) -> tuple[list[list[float]], list[bool]]:
        """Per-turn advantages of the usable records, and which records train."""
        algo = self.config.algorithm
        usable = [r.usable_for_training for r in records]
        kept = [r for r, ok in zip(records, usable, strict=True) if ok]
        values = adv.turn_advantages(
            kept,
            algo.estimator,
            score_source=algo.score_source,
            gamma=algo.gamma,
            step_weight=algo.step_weight,
            scale_by_std=algo.scale_by_std,
            similarity=algo.similarity,
            cross_steps=algo.cross_steps,
        )
        keep = [True] * len(kept)
        if algo.filter_zero_variance:
            scores = [adv.episode_score(r, algo.score_source) for r in kept]
            keep = adv.informative_groups(scores, [r.group_id for r in kept])
            if algo.estimator == "gigpo":  # step groups may carry signal when episodes tie
                keep = [k or any(abs(a) > 1e-9 for a in v) for k, v in zip(keep, values, strict=True)]
        iterator = iter(zip(values, keep, strict=True))
        full_values, full_keep = [], []
        for ok in usable:
            value, flag = next(iterator) if ok else ([], False)
            full_values.append(value)
            full_keep.append(flag)
        return full_values, full_keep

    def train_step(self) -> dict[str, Any]:
        """Roll out, update and sync once; returns (and logs) the step's metrics."""
        started = time.perf_counter()
        step = self.step + 1
        records = self.rollout(step)
        rollout_s = time.perf_counter() - started
        values, keep = self.advantages(records)
        rows = rows_from_records(records, values, keep)
        tick = time.perf_counter()
        stats = self.update(rows) if rows else {}
        update_s = time.perf_counter() - tick
        self.step = step  # before the push: the weights pushed are this step's
        tick = time.perf_counter()
        if self.sync is not None and rows:
            self._push_weights()
        sync_s = time.perf_counter() - tick
        total = time.perf_counter() - started
        generated = sum(len(s) for r in records if r.tokens for s in r.tokens.response_ids)
        trained = sum(len(r.response_ids) for r in rows)
        groups = {r.group_id for r in records}
        kept_groups = {r.group_id for r, k in zip(records, keep, strict=True) if k}
        metrics = {
            "step": step,
            **episode_metrics(records, "reward"),
            "success/rate": sum(r.success for r in records) / max(len(records), 1),
            "batch/episodes": len(records),
            "batch/rows": len(rows),
            "batch/zero_variance_group_fraction": 1 - len(kept_groups) / max(len(groups), 1),
            "batch/generated_tokens": generated,
            "batch/trained_tokens": trained,
            **stats,
            "time/rollout_s": rollout_s,
            "time/update_s": update_s,
            "time/sync_s": sync_s,
            "time/step_s": total,
            "perf/tokens_per_s": (generated + trained) / total if total > 0 else 0.0,
            "perf/generated_tokens_per_s": generated / rollout_s if rollout_s > 0 else 0.0,
        }
        every = self.config.run.eval_every
        if every and step % every == 0 and self.config.env.eval_groups:
            tick = time.perf_counter()
            metrics.update({f"eval/{k.split('/', 1)[1]}": v for k, v in self.evaluate().items()})
            metrics["time/eval_s"] = time.perf_counter() - tick
        metrics.update(self._cuda_memory())  # after evaluation, so the step's peak counts it too
        self.log.write(metrics)
        return metrics

    def _cuda_memory(self) -> dict[str, float]:
        """The trainer's peak GPU memory during the step (what a vLLM server on the same card must leave)."""
        import torch

        if self.device.type != "cuda":
            return {}
        peak = torch.cuda.max_memory_allocated(self.device) / 2**30
        torch.cuda.reset_peak_memory_stats(self.device)
        return {"perf/cuda_peak_allocated_gib": peak}

    def update(self, rows: list[Row]) -> dict[str, float]:
        """Epochs of mini-batch optimizer steps over ``rows``; returns token-weighted loss statistics."""
        import torch

        optim = self.config.optim
        pad = self.tokenizer.pad_token_id
        needs_old = optim.epochs > 1 or optim.mini_batches > 1
        with torch.no_grad():
            if needs_old:
                self._fill_logprobs(rows, "old_logprobs", self.model)
            if self.reference is not None:
                with self.reference.context():
                    self._fill_logprobs(rows, "ref_logprobs", self.reference.module())
        self.model.train()
        steps_taken = 0
        generator = torch.Generator().manual_seed(derive_seed("update", self.config.run.seed, self.step) % (2**63))
        totals: dict[str, float] = {}
        weight_total = 0.0
        grad_norms = []
        mismatch = []
        for _ in range(optim.epochs):
            order = torch.randperm(len(rows), generator=generator).tolist()
            size = math.ceil(len(rows) / optim.mini_batches)
            for mini in chunks([rows[i] for i in order], size):
                num_tokens = float(sum(len(r.response_ids) for r in mini))
                self.optimizer.zero_grad(set_to_none=True)
                for micro in chunks(mini, optim.micro_batch_size):
                    batch = collate(micro, pad)
                    parts, logprobs = self._micro_loss(batch, micro, num_tokens, len(mini))
                    parts.loss.backward()
                    tokens = batch.num_tokens
                    weight_total += tokens
                    for key, value in (
                        ("loss/pg", parts.pg_loss),
                        ("loss/kl_ref", parts.kl),
                        ("loss/entropy", parts.entropy),
                        ("loss/clip_fraction", parts.clip_fraction),
                        ("loss/approx_kl_old", parts.approx_kl_old),
                    ):
                        totals[key] = totals.get(key, 0.0) + value * tokens
                    if steps_taken == 0:  # the weights the sampler used
                        gap = (logprobs.detach() - batch.rollout_logprobs).abs() * batch.response_mask
                        mismatch.append(float(gap.sum()) / max(tokens, 1.0))
                if optim.max_grad_norm:
                    norm = torch.nn.utils.clip_grad_norm_(trainable_parameters(self.model), optim.max_grad_norm)
                    grad_norms.append(float(norm))
                self.optimizer.step()
                steps_taken += 1
        self.model.eval()
        stats = {key: value / max(weight_total, 1.0) for key, value in totals.items()}
        if grad_norms:
            stats["optim/grad_norm"] = sum(grad_norms) / len(grad_norms)
        stats["optim/optimizer_steps"] = optim.epochs * optim.mini_batches
        stats["check/sampler_logprob_gap"] = sum(mismatch) / max(len(mismatch), 1)
        return stats

    def _micro_loss(self, batch: Any, micro: Sequence[Row], num_tokens: float, num_seqs: int) -> tuple[Any, Any]:
        import torch

        algo = self.config.algorithm
        logits = response_logits(self.model, batch)
        logprobs = token_logprobs(logits, batch.targets)
        with torch.set_grad_enabled(self.config.loss.entropy_coef > 0):
            entropy = entropy_from_logits(logits)
        if micro[0].old_logprobs is None:
            old = logprobs.detach()
        else:
            old = _padded([r.old_logprobs for r in micro], batch.response_width)
        ref = None if self.reference is None else _padded([r.ref_logprobs for r in micro], batch.response_width)
        weights = None
        if algo.reasoning_weight != 1.0 or algo.uncertainty_beta:
            weights = adv.token_weights(
                batch.response_mask,
                batch.action_mask,
                reasoning_weight=algo.reasoning_weight,
                uncertainty=entropy.detach(),
                uncertainty_beta=algo.uncertainty_beta,
            )
        loss_config = self.config.loss
        if loss_config.agg == "seq-mean-token-sum-norm" and loss_config.norm_constant is None:
            from dataclasses import replace

            loss_config = replace(loss_config, norm_constant=float(self.config.rollout.max_tokens))
        parts = policy_loss(
            logprobs,
            old,
            batch.advantages,
            batch.response_mask,
            loss_config,
            weights=weights,
            ref_logprobs=ref,
            entropy=entropy,
            num_tokens=num_tokens,
            num_seqs=num_seqs,
        )
        return parts, logprobs

    def _fill_logprobs(self, rows: list[Row], field: str, module: Any) -> None:
        """Set ``row.<field>`` to the per-token logprobs ``module`` gives each row's response."""
        module_was_training = module.training
        module.eval()
        for micro in chunks(rows, self.config.optim.micro_batch_size):
            batch = collate(micro, self.tokenizer.pad_token_id)
            logprobs = token_logprobs(response_logits(module, batch), batch.targets)
            for i, row in enumerate(micro):
                setattr(row, field, logprobs[i, : len(row.response_ids)].tolist())
        module.train(module_was_training)

    def warmup(self) -> dict[str, float]:
        """Behaviour cloning of ``warmup.policy`` (see :mod:`agentenvs.train.warmup`), logged as step 0."""
        from agentenvs.train.warmup import behaviour_clone

        metrics = {"step": 0, **behaviour_clone(self)}
        self.warmed = True
        if self.sync is not None:
            self._push_weights()
        self.log.write(metrics)
        return metrics

    # ------------------------------------------------------------------ evaluation

    def evaluate(self, *, groups: int | None = None, temperature: float | None = None) -> dict[str, float]:
        """Mean return, success and score on ``env.eval_split`` (see :meth:`evaluation_records`)."""
        return episode_metrics(self.evaluation_records(groups=groups, temperature=temperature), "eval")

    def evaluation_records(self, *, groups: int | None = None, temperature: float | None = None) -> list[EpisodeRecord]:
        """One episode per held-out task with fixed seeds (the same in every call, so before/after pair up)."""
        env = self.config.env
        if not env.eval_split:
            raise InvalidArgument("env.eval_split is not set; name the held-out split to evaluate on")
        temperature = env.eval_temperature if temperature is None else temperature
        if self._eval_policy is None or self._eval_policy.sampling_settings.temperature != temperature:
            if self._eval_policy is not None:
                self._eval_policy.close()
            self._eval_policy = self._make_policy(temperature)
        policy, self.policy = self.policy, self._eval_policy
        try:
            return self.rollout(0, split=env.eval_split, groups=groups or env.eval_groups or 32, group_size=1)
        finally:
            self.policy = policy

    # ------------------------------------------------------------------ the run

    def train(self) -> list[dict[str, Any]]:
        """Run until ``run.steps``; checkpoint, plot, and return the metrics of the steps run now."""
        run = self.config.run
        history = []
        progress = None
        if run.progress:
            from tqdm import tqdm

            progress = tqdm(total=run.steps, initial=self.step, desc="train", unit="step", dynamic_ncols=True)
        if self.step == 0 and self.config.warmup.steps and not self.warmed:
            self.warmup()
        try:
            while self.step < run.steps:
                metrics = self.train_step()
                history.append(metrics)
                if progress is not None:
                    progress.update(1)
                    progress.set_postfix(reward=f"{metrics.get('reward/mean', 0.0):.3f}")
                if run.save_every and self.step % run.save_every == 0:
                    self.save()
        finally:
            if progress is not None:
                progress.close()
        if not latest_checkpoint(self.out) or latest_checkpoint(self.out).name != f"step-{self.step}":
            self.save()
        self.plot()
        return history

    def plot(self) -> Path | None:
        return plot_curves(self.log.rows(), self.out / CURVES_FILE)

    def save(self) -> Path:
        """Write ``<out>/checkpoints/step-N`` (weights or adapter, tokenizer, optimizer, step) atomically."""
        import torch

        root = self.out / CHECKPOINTS
        final = root / f"step-{self.step}"
        staging = root / f".step-{self.step}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        save_model(self.model, self.tokenizer, staging)
        torch.save(self.optimizer.state_dict(), staging / "optimizer.pt")
        state = {"step": self.step, "config": self.config.to_dict()}
        (staging / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
        return final

    def _restore(self, checkpoint: Path) -> None:
        import torch

        state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
        self.step = int(state["step"])
        optimizer = checkpoint / "optimizer.pt"
        if optimizer.is_file():
            self.optimizer.load_state_dict(torch.load(optimizer, map_location=self.device))
        self.log.truncate_after(self.step)

    def _push_weights(self) -> None:
        self.sync.push(self.model, self.tokenizer, self.step, lora=self.config.model.lora)
        for policy in (getattr(self, "policy", None), self._eval_policy):
            if policy is not None:
                policy.model_name = self.sync.served_model

    def close(self) -> None:
        for policy in (getattr(self, "policy", None), self._eval_policy):
            if policy is not None:
                policy.close()
        if self._env is not None:
            self._env.close()
        self.log.close()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _padded(values: Sequence[Sequence[float]], width: int) -> Any:
    import torch

    out = torch.zeros((len(values), width), dtype=torch.float32)
    for i, row in enumerate(values):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out
