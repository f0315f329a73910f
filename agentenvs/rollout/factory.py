"""``make_policy(spec)``: the policy specs shared by ``agentenvs rollout`` and ``agentenvs eval``.

=====================  ==========================================================================
spec                   policy
=====================  ==========================================================================
``random``             ``RandomPolicy``: a seeded choice among the admissible actions
``expert``             ``ExpertPolicy``: the environment's privileged plan
``baseline:NAME``      ``ExpertPolicy`` on ``info.privileged.baseline_actions[NAME]`` (forecast: ``base_rate``,
                       ``half``)
``smollm2``            ``TransformersPolicy`` on the embedded SmolLM2-135M-Instruct (converted once)
``hf:PATH``            ``TransformersPolicy`` on a local transformers checkpoint folder
``openai:URL[:model]`` ``OpenAIPolicy`` on an OpenAI-compatible server, e.g.
                       ``openai:http://127.0.0.1:8000/v1:smollm2``; the model defaults to the server's first
=====================  ==========================================================================
"""

from __future__ import annotations

import re
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.llm import Sampling
from agentenvs.rollout.policy import Policy
from agentenvs.rollout.prompting import HistoryConfig

SPECS = ("random", "expert", "smollm2", "hf:PATH", "openai:URL[:model]", "baseline:NAME")
OPENAI_SPEC = re.compile(r"^(?P<url>https?://[^/:\s]+(?::\d+)?(?:/[^:\s]*)?)(?::(?P<model>\S+))?$")


def parse_openai_spec(rest: str) -> tuple[str, str | None]:
    """``URL[:model]`` into the URL and the model (None: ask the server)."""
    match = OPENAI_SPEC.match(rest)
    if not match:
        raise InvalidArgument(f"openai:{rest} is not openai:URL[:model], for example openai:http://127.0.0.1:8000/v1")
    return match["url"].rstrip("/"), match["model"]


def make_policy(
    spec: str,
    *,
    seed: int = 0,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int = 128,
    stop: tuple[str, ...] = (),
    history: HistoryConfig | str | None = None,
    **options: Any,
) -> Policy:
    """The policy a spec names (see the module table); sampling settings apply to model policies.

    ``options`` go to the policy's constructor: ``batch_size``/``device`` (transformers), ``mode``,
    ``tokenizer``, ``timeout_s``, ``retries``, ``api_key`` (openai).
    """
    if isinstance(history, str):
        history = HistoryConfig.parse(history)
    sampling = Sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens, stop=tuple(stop))
    kind, _, rest = spec.partition(":")
    if spec == "random":
        from agentenvs.rollout.scripted import RandomPolicy

        return RandomPolicy(seed=seed)
    if spec == "expert":
        from agentenvs.rollout.scripted import ExpertPolicy

        return ExpertPolicy()
    if kind == "baseline" and rest:
        from agentenvs.rollout.scripted import ExpertPolicy

        return ExpertPolicy(baseline=rest)
    if spec == "smollm2" or (kind == "hf" and rest):
        from agentenvs.rollout.hf_policy import TransformersPolicy
        from agentenvs.rollout.smollm2 import smollm2_checkpoint

        path = smollm2_checkpoint() if spec == "smollm2" else rest
        policy = TransformersPolicy(path, sampling=sampling, history=history, seed=seed, **options)
        if spec == "smollm2":
            policy.name = "smollm2"
        return policy
    if kind == "openai" and rest:
        from agentenvs.rollout.openai_policy import OpenAIPolicy

        url, model = parse_openai_spec(rest)
        return OpenAIPolicy(url, model, sampling=sampling, history=history, seed=seed, **options)
    raise InvalidArgument(f"unknown policy {spec!r}; use one of: {', '.join(SPECS)}")
