"""The reference GRPO loop: roll out with the current policy, compute advantages, update, sync, repeat.

One step:

1. **Rollout** (:mod:`agentenvs.train.sampling`, through ``agentenvs.rollout``): ``groups_per_step``
   tasks, each played ``group_size`` times from the same seed by the current policy (in-process
   transformers, or a vLLM server), as episode records with token ids, sampled logprobs and masks.
2. **Advantages** (:mod:`agentenvs.train.advantages`): one value per turn; episodes that infrastructure
   broke are dropped, and with ``filter_zero_variance`` so are groups whose members all scored alike.
3. **Update** (:mod:`agentenvs.train.update`): ``epochs`` passes over the rows (one per episode turn)
   in ``mini_batches`` optimizer steps, each accumulated over micro-batches of ``micro_batch_size``
   rows, with the loss of :mod:`agentenvs.train.losses`.
4. **Sync**: in-process the policy shares the trained module, so nothing moves; with vLLM the adapter
   (or the whole model) is pushed to the server (:mod:`agentenvs.train.vllm_sync`).

Checkpoints (:mod:`agentenvs.train.checkpoints`, ``<out>/checkpoints/step-N``) hold the weights (or
adapter), the optimizer and the step; a run started again with the same ``out`` resumes from the last
one. This module wires the pieces together and logs each step (docs/train.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.records import EpisodeRecord
from agentenvs.train import advantages as adv
from agentenvs.train.batching import rows_from_records
from agentenvs.train.checkpoints import latest_checkpoint, restore_checkpoint, save_checkpoint
from agentenvs.train.config import TrainConfig
from agentenvs.train.metrics import CURVES_FILE, MetricsLog, episode_metrics, plot_curves
from agentenvs.train.modeling import Reference, load_model, trainable_parameters
from agentenvs.train.sampling import TrainRollouts
from agentenvs.train.update import PolicyUpdate


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
        self.model, self.tokenizer = load_model(config.model, seed=run.seed, checkpoint=checkpoint)
        self.device = next(self.model.parameters()).device
        self.optimizer = torch.optim.AdamW(
            trainable_parameters(self.model),
            lr=config.optim.lr,
            betas=tuple(config.optim.betas),
            weight_decay=config.optim.weight_decay,
        )
        self.reference = Reference(self.model, config.model.lora) if config.loss.kl_coef > 0 else None
        self.updater = PolicyUpdate(self.model, self.tokenizer, self.optimizer, self.reference, config)
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
        served = self.sync.served_model if self.sync is not None else config.vllm.model
        self.rollouts = TrainRollouts(config, self.model, self.tokenizer, served)
        self.rollouts.check_splits()
        self.replay = None
        if config.rollout.replay_episodes:
            from agentenvs.train.replay import ReplaySource

            self.replay = ReplaySource(config.rollout.replay_episodes, config.rollout.replay_predictions)
        if self.sync is not None and (self.step > 0 or config.model.lora):
            self._push_weights()

    @property
    def policy(self) -> Any:
        """The policy that plays the training episodes (shares the trained module in-process)."""
        return self.rollouts.policy

    def local_env(self) -> Any:
        """An in-process instance of the environment (see ``TrainRollouts.local_env``)."""
        return self.rollouts.local_env()

    # ------------------------------------------------------------------ one step

    def advantages(self, records: Sequence[EpisodeRecord]) -> tuple[list[list[float]], list[bool]]:
        """Per-turn advantages of the trainable records, and which records train.

        Records that infrastructure broke, and records whose reward is still pending (a forecast waiting
        for its question to resolve: its reward 0 is a placeholder, trained on once replayed), are left out.
        """
        algo = self.config.algorithm
        usable = [r.usable_for_training and not r.reward_pending for r in records]
        kept = [r for r, ok in zip(records, usable, strict=True) if ok]
        settings = adv.AdvantageSettings(
            estimator=algo.estimator,
            score_source=algo.score_source,
            score_scale=algo.score_scale,
            invalid_action_penalty=algo.invalid_action_penalty,
            gamma=algo.gamma,
            step_weight=algo.step_weight,
            scale_by_std=algo.scale_by_std,
            similarity=algo.similarity,
            cross_steps=algo.cross_steps,
        )
        values = adv.advantages_for(kept, settings)
        keep = [True] * len(kept)
        if algo.filter_zero_variance:
            keep = adv.informative_groups(values, [r.group_id for r in kept])
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
        records = self.rollouts.rollout(step)
        live = len(records)
        replayed: dict[str, Any] = {}
        if self.replay is not None:  # delayed rewards backfilled since: trained next to the live rollouts
            self.replay.keep_pending(records)
            old, replayed = self.replay.take(self.config.rollout.replay_per_step or None)
            records = [*records, *old]
        rollout_s = time.perf_counter() - started
        values, keep = self.advantages(records)
        off_policy = [index >= live for index in range(len(records))]
        rows = rows_from_records(
            records, values, keep, temperature=self.config.rollout.temperature, off_policy=off_policy
        )
        tick = time.perf_counter()
        stats = self.updater.run(rows, step) if rows else {}
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
            "batch/pending_episodes": sum(r.reward_pending for r in records),
            "batch/generated_tokens": generated,
            "batch/trained_tokens": trained,
            **stats,
            **replayed,
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
            metrics.update(self.evaluate())
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
        """Mean return, success and score on each of ``env.eval_split`` (``eval/...``; with several splits
        ``eval/<split>/...``), see :meth:`evaluation_records`."""
        splits = self.config.eval_splits
        if not splits:
            raise InvalidArgument("env.eval_split is not set; name the held-out split(s) to evaluate on")
        metrics: dict[str, float] = {}
        for split in splits:
            records = self.evaluation_records(split, groups=groups, temperature=temperature)
            metrics.update(episode_metrics(records, "eval" if len(splits) == 1 else f"eval/{split}"))
        return metrics

    def evaluation_records(
        self, split: str | None = None, *, groups: int | None = None, temperature: float | None = None
    ) -> list[EpisodeRecord]:
        """One episode per held-out task of ``split`` (default: the first evaluation split) with fixed seeds
        (the same in every call, so before/after pair up)."""
        split = split or (self.config.eval_splits or [None])[0]
        if split is None:
            raise InvalidArgument("env.eval_split is not set; name the held-out split(s) to evaluate on")
        return self.rollouts.evaluation_records(split, groups=groups, temperature=temperature)

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
        return save_checkpoint(self.out, self.step, self.model, self.tokenizer, self.optimizer, self.config.to_dict())

    def _restore(self, checkpoint: Path) -> None:
        self.step = restore_checkpoint(checkpoint, self.optimizer, self.device)
        self.log.truncate_after(self.step)

    def _push_weights(self) -> None:
        self.sync.push(self.model, self.tokenizer, self.step, lora=self.config.model.lora)
        self.rollouts.serve(self.sync.served_model)

    def close(self) -> None:
        self.rollouts.close()
        if self.replay is not None:
            self.replay.close()
        self.log.close()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
