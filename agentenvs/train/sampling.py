"""The episodes a training run learns from and is evaluated on (docs/train.md, "One step").

``TrainRollouts`` holds the rollout policies of a run: the training policy (in-process transformers
sharing the trained module, or an ``OpenAIPolicy`` on a vLLM server that gets every step's weights)
and the evaluation policy (the same model at the evaluation temperature). Each is an ordinary rollout
``Policy`` played by the rollout driver, like the ones ``agentenvs rollout`` and ``agentenvs eval`` use.
"""

from __future__ import annotations

from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.policy import Policy
from agentenvs.rollout.records import EpisodeRecord
from agentenvs.seeding import derive_seed
from agentenvs.train.config import TrainConfig


class TrainRollouts:
    """Plans and plays the episodes of each step and of the held-out evaluation."""

    def __init__(self, config: TrainConfig, model: Any, tokenizer: Any, served_model: str | None):
        self.config = config
        self.model = model
        self.tokenizer = tokenizer
        self.served_model = served_model
        """The vLLM server's name of the current weights (None in-process)."""
        self._env: Any = None
        self._tasks: dict[str, list[str] | None] = {}
        self._eval_policy: Any = None
        self.policy = self.make_policy(config.rollout.temperature)

    def make_policy(self, temperature: float) -> Policy:
        """A policy on the trained model: on the vLLM server when one is configured, else in-process."""
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
                self.served_model,
                mode="completions",
                tokenizer=self.tokenizer,
                sampling=sampling,
                history=history,
                seed=self.config.run.seed,
                timeout_s=self.config.vllm.timeout_s,
                logprob_kind=self.config.vllm.logprob_kind,
            )
        from agentenvs.rollout.hf_policy import TransformersPolicy

        return TransformersPolicy(
            self.model,
            self.tokenizer,
            device=str(next(self.model.parameters()).device),
            sampling=sampling,
            history=history,
            seed=self.config.run.seed,
            batch_size=settings.batch_size,
        )

    def rollout(
        self,
        step: int,
        *,
        split: str | None = None,
        groups: int | None = None,
        group_size: int | None = None,
        policy: Policy | None = None,
    ) -> list[EpisodeRecord]:
        """The episodes of ``step``: tasks shuffled by (run seed, step), each played ``group_size`` times."""
        from agentenvs.rollout.driver import RolloutConfig, plan_episodes, run_rollouts

        env = self.config.env
        settings = self.config.rollout
        split = split or env.split
        episodes = plan_episodes(
            env.name,
            split,
            groups or settings.groups_per_step,
            group_size or settings.group_size,
            seed=derive_seed("train", self.config.run.seed, split, step) % (2**31),
            tasks=self._split_tasks(split),
            shuffle=True,
        )
        self.model.eval()
        return run_rollouts(
            env.name,
            policy or self.policy,
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

    def evaluation_records(
        self, split: str, *, groups: int | None = None, temperature: float | None = None
    ) -> list[EpisodeRecord]:
        """One episode per held-out task of ``split`` with fixed seeds (the same in every call, so
        before/after pair up); at most one per task, so ``eval_groups`` above the split's size plays it all."""
        env = self.config.env
        temperature = env.eval_temperature if temperature is None else temperature
        if self._eval_policy is None or self._eval_policy.sampling_settings.temperature != temperature:
            if self._eval_policy is not None:
                self._eval_policy.close()
            self._eval_policy = self.make_policy(temperature)
        groups = groups or env.eval_groups or 32
        tasks = self._split_tasks(split)
        if tasks:
            groups = min(groups, len(tasks))
        return self.rollout(0, split=split, groups=groups, group_size=1, policy=self._eval_policy)

    def check_splits(self) -> None:
        """Fail before any rollout when the training or an evaluation split does not exist."""
        env = self.local_env()
        if env is None or not hasattr(env, "splits"):
            return
        known = env.splits()
        wanted = [self.config.env.split, *(self.config.eval_splits if self.config.env.eval_groups else [])]
        missing = [split for split in wanted if split not in known]
        if missing:
            raise InvalidArgument(
                f"{self.config.env.name} has no split(s) {missing}; its splits are {sorted(known)}. Set env.split "
                "and env.eval_split to some of them"
            )

    def _split_tasks(self, split: str) -> list[str] | None:
        from agentenvs.rollout.driver import task_ids

        env = self.config.env
        if split not in self._tasks:
            chosen = env.tasks if split == env.split else None
            self._tasks[split] = chosen or task_ids(env.name, split, self.local_env())
        return self._tasks[split]

    def local_env(self) -> Any:
        """An in-process instance of the environment (for its task list and description), made once."""
        if self.config.env.servers:
            return None
        if self._env is None:
            from agentenvs.registry import make

            self._env = make(self.config.env.name, **self.config.env.kwargs)
        return self._env

    def serve(self, served_model: str) -> None:
        """Point the policies at the weights the vLLM server now serves under ``served_model``."""
        self.served_model = served_model
        for policy in (self.policy, self._eval_policy):
            if policy is not None:
                policy.model_name = served_model

    def close(self) -> None:
        for policy in (self.policy, self._eval_policy):
            if policy is not None:
                policy.close()
        if self._env is not None:
            self._env.close()
