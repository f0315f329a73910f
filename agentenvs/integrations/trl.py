"""TRL: our environments as a multi-turn ``rollout_func`` for ``trl.GRPOTrainer`` (TRL 1.16).

``GRPOTrainer(rollout_func=...)`` hands the hook the batch's prompts (each row repeated
``num_generations`` times) and the trainer; it wants ``prompt_ids``, ``completion_ids`` and ``logprobs``
back, trains only where the optional ``env_mask`` is 1, and passes every other returned field to the
reward functions. ``EnvRollout`` plays one whole episode per prompt with the trainer's live model
(our ``TransformersPolicy``, token in / token out), so the completion is every turn's sampled ids with
the environment's observations between them, masked out through ``env_mask``.

    rollout = EnvRollout("bandit", max_turns=4, max_tokens=32)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=GRPOConfig(...),
                          train_dataset=rollout.dataset(256), reward_funcs=env_reward, rollout_func=rollout)
"""

from __future__ import annotations

import itertools
from typing import Any

from agentenvs.integrations import EpisodeRef, episode_refs, require
from agentenvs.integrations.episodes import completion, play
from agentenvs.seeding import derive_seed

TESTED = {"trl": "1.16.0", "transformers": "5.25.0"}


class EnvRollout:
    """A ``rollout_func`` playing ``env`` episodes (in-process, or on ``servers``) with the trainer's model."""

    def __init__(
        self,
        env: str,
        *,
        servers: Any = None,
        env_kwargs: dict[str, Any] | None = None,
        max_turns: int | None = None,
        max_tokens: int | None = None,
        history: str = "full",
        concurrency: int = 16,
        time_limit_s: float | None = None,
        seed: int = 0,
    ):
        require("trl", "trl", "agentenvs.integrations.trl")
        if history != "full":
            raise ValueError("TRL trains one completion per episode, so the history must be 'full' (one sequence)")
        self.env = env
        self.servers = servers
        self.env_kwargs = dict(env_kwargs or {})
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.concurrency = concurrency
        self.time_limit_s = time_limit_s
        self.seed = seed
        self.calls = itertools.count()
        self.last_records: list[Any] = []
        """The episode records of the latest call (rewards, turns, success): for logging and tests."""

    def dataset(self, n: int, *, split: str | None = None, seed: int = 0) -> Any:
        """A ``datasets.Dataset`` of ``n`` rows whose ``prompt`` is an episode reference (task and seed)."""
        datasets = require("trl", "datasets", "EnvRollout.dataset")
        return datasets.Dataset.from_list(dataset_rows(self.env, n, split=split, seed=seed, env_kwargs=self.env_kwargs))

    def policy(self, trainer: Any) -> Any:
        """Our token-in/token-out policy on the trainer's model, sampling as ``trainer.args`` says."""
        from agentenvs.rollout.hf_policy import TransformersPolicy
        from agentenvs.rollout.llm import Sampling
        from agentenvs.rollout.prompting import HistoryConfig

        args = trainer.args
        model = trainer.accelerator.unwrap_model(trainer.model)
        sampling = Sampling(
            temperature=float(args.temperature),
            top_p=float(args.top_p),
            top_k=int(args.top_k or 0),
            max_tokens=int(self.max_tokens or args.max_completion_length),
        )
        seed = derive_seed("trl-rollout", self.seed, trainer.state.global_step, next(self.calls)) % (2**31)
        return TransformersPolicy(
            model,
            trainer.processing_class,
            device=str(next(model.parameters()).device),
            sampling=sampling,
            history=HistoryConfig.parse("full"),
            seed=seed,
            batch_size=self.concurrency,
        )

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt; return TRL's fields plus ``env_mask`` and the episodes' outcomes."""
        refs = [EpisodeRef.decode(p) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        was_training = model.training
        policy = self.policy(trainer)
        try:
            records = play(
                refs,
                policy,
                servers=self.servers,
                env_kwargs=self.env_kwargs,
                max_turns=self.max_turns,
                concurrency=self.concurrency,
                time_limit_s=self.time_limit_s,
            )
        finally:
            policy.close()
            model.train(was_training)
        self.last_records = records
        pad = trainer.processing_class.eos_token_id
        parts = [completion(record, pad) for record in records]
        return {
            "prompt_ids": [p.prompt_ids for p in parts],
            "completion_ids": [p.completion_ids for p in parts],
            # TRL corrects for the sampler with these; it takes None (no correction) but not a gap in the batch
            "logprobs": None if any(p.logprobs is None for p in parts) else [p.logprobs for p in parts],
            "env_mask": [p.mask for p in parts],
            "env_return": [float(r.return_) for r in records],
            "env_score": [float(r.score) for r in records],
            "env_success": [bool(r.success) for r in records],
            "env_turns": [int(r.num_turns) for r in records],
        }


def dataset_rows(env: str, n: int, *, split: str | None = None, seed: int = 0, env_kwargs: Any = None) -> list[dict]:
    """``n`` rows of a TRL prompt dataset: each ``prompt`` is an episode reference ``EnvRollout`` resets."""
    return [{"prompt": ref.encode()} for ref in episode_refs(env, n, split=split, seed=seed, env_kwargs=env_kwargs)]


def env_reward(completions: list[Any], env_return: list[float], **_: Any) -> list[float]:
    """A TRL reward function: the episode's return (the sum of the environment's rewards)."""
    return [float(x) for x in env_return]


def env_score(completions: list[Any], env_score: list[float], **_: Any) -> list[float]:
    """A TRL reward function: the episode's final ``score`` in [0, 1] (docs/contract.md)."""
    return [float(x) for x in env_score]


__all__ = ["TESTED", "EnvRollout", "dataset_rows", "env_reward", "env_score"]
