"""The trainer's configuration: nested dataclasses read from a YAML or JSON file.

Every field has a default, so a config file names only what differs. Unknown keys are errors that
list the known ones (a typo must not silently train with a default). ``overrides`` take dotted keys,
``rollout.group_size=8``, as the CLI's ``--set`` does.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.train.advantages import ESTIMATORS, SCORE_SOURCES
from agentenvs.train.losses import AGG_MODES, LossConfig
from agentenvs.train.weights import CORRECTION_MODES


@dataclass
class ModelConfig:
    """Which model to train and how."""

    path: str = "tiny"
    """A transformers checkpoint folder, a Hugging Face hub id ``owner/name`` (downloaded into the hub
    cache), ``smollm2`` (the embedded SmolLM2-135M-Instruct), or ``tiny`` (a from-scratch
    character-level Llama, :mod:`agentenvs.train.tiny`)."""
    dtype: str = "float32"
    device: str | None = None
    lora: bool = False
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    tiny: dict[str, Any] = field(default_factory=dict)
    """Sizes for ``path: tiny`` (hidden_size, layers, heads, intermediate_size, max_positions, seed)."""
    gradient_checkpointing: bool = False


@dataclass
class EnvConfig:
    """Where episodes come from."""

    name: str = "bandit"
    entry_point: str | None = None
    """``module:Class`` to register ``name`` with before training (an environment of your own, or
    ``agentenvs.train.tiny_bandit:TinyBandit``)."""
    split: str = "train"
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_turns: int | None = None
    tasks: list[str] | None = None
    """Task ids to train on (default: the whole split, cycled)."""
    servers: list[str] | None = None
    """Environment server URLs (``agentenvs serve``); None runs the environments in-process."""
    eval_split: str | list[str] | None = "test"
    """The held-out split, or several evaluated side by side (ALFWorld's ``[valid_seen, valid_unseen]``,
    logged as ``eval/<split>/...``)."""
    eval_groups: int = 0
    """Episodes per evaluation (one per task, fixed seeds); 0 turns evaluation off."""
    eval_temperature: float = 1.0
    """Sampling temperature of evaluation (0: greedy)."""


@dataclass
class RolloutSettings:
    """How the policy samples."""

    groups_per_step: int = 4
    group_size: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    stop: list[str] = field(default_factory=list)
    history: str = "full"
    """``full`` or ``last:K`` (see ``agentenvs.rollout.HistoryConfig``)."""
    concurrency: int = 32
    batch_size: int = 32
    time_limit_s: float | None = None
    replay_episodes: str | None = None
    """Episode file or folder of delayed-reward rollouts (forecast); with ``replay_predictions`` each step also
    trains on those whose reward the prediction store backfilled since (``agentenvs.train.replay``)."""
    replay_predictions: str | None = None
    replay_per_step: int = 0
    """Replayed episodes per step at most (0: all that are ready)."""


@dataclass
class AlgorithmConfig:
    """Advantages and which episodes train."""

    estimator: str = "grpo"
    score_source: str = "return"
    """What an episode is worth: ``return`` (the sum of the environment's rewards, turn by turn), ``score``
    or ``success`` (on the last turn). GiGPO's step returns use the same rewards."""
    score_scale: float = 1.0
    """Multiplies the rewards (verl-agent's ALFWorld reward is 10 * won: ``score_source: success``, 10)."""
    invalid_action_penalty: float = 0.0
    """Subtracted from the score of each turn whose action the environment refused (verl-agent's
    ``invalid_action_penalty_coef``, 0.1 in its ALFWorld and WebShop scripts)."""
    gamma: float = 0.95
    step_weight: float = 1.0
    scale_by_std: bool | None = None
    similarity: float | None = None
    cross_steps: bool = False
    filter_zero_variance: bool = True
    reasoning_weight: float = 1.0
    """ActFocus: loss weight of generated tokens outside the action span (1.0: no reweighting)."""
    uncertainty_beta: float = 0.0
    """ActFocus: extra weight on uncertain action tokens (by entropy z-score)."""


@dataclass
class WarmupConfig:
    """Behaviour cloning of a scripted policy before RL, to teach a from-scratch model the action format."""

    steps: int = 0
    """Optimizer steps of supervised training (0: no warm-up)."""
    episodes: int = 64
    policy: str = "random"
    """A scripted policy spec of ``agentenvs.rollout.make_policy`` (``random``, ``expert``)."""
    lr: float = 1e-3
    batch_size: int = 16


@dataclass
class OptimConfig:
    """The update: epochs over the batch, mini-batches (one optimizer step each), micro-batches."""

    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.99)
    epochs: int = 1
    mini_batches: int = 1
    micro_batch_size: int = 16
    """Rows (episode turns) per forward pass; gradients accumulate over a mini-batch."""
    max_grad_norm: float | None = 1.0


@dataclass
class VLLMConfig:
    """Rollouts on a running vLLM server and how new weights reach it."""

    url: str | None = None
    """``http://host:port/v1``; None samples in-process with transformers."""
    model: str | None = None
    """The served base model name (``--served-model-name``)."""
    sync: str = "lora"
    """``lora``: save the adapter and hot-load it (``/v1/load_lora_adapter``); ``full``: save the whole
    model and ask the server to reload its weights from that folder."""
    sync_dir: str | None = None
    """A folder both the trainer and the server can read (default: ``<out>/sync``)."""
    timeout_s: float = 600.0
    logprob_kind: str = "raw"
    """What the server's logprobs are of: ``raw`` (vLLM's default) or ``processed`` (started with
    ``--logprobs-mode processed_logprobs``). At a ``rollout.temperature`` other than 1 only ``processed``
    ones can be compared with the trainer's (``check/sampler_logprob_gap``, importance correction)."""


@dataclass
class RunConfig:
    """Length, seeds and outputs of a run."""

    steps: int = 10
    seed: int = 0
    out: str = "runs/train"
    save_every: int = 0
    """Checkpoint every N steps (0: only at the end)."""
    eval_every: int = 0
    torch_threads: int | None = None
    progress: bool = True


@dataclass
class TrainConfig:
    """The whole configuration (see ``agentenvs/train/configs/`` for examples)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutSettings = field(default_factory=RolloutSettings)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> TrainConfig:
        """Check values that would fail late (mid-run) and say which setting to change."""
        if self.algorithm.estimator not in ESTIMATORS:
            raise InvalidArgument(f"algorithm.estimator must be one of {ESTIMATORS}, got {self.algorithm.estimator!r}")
        if self.algorithm.score_source not in SCORE_SOURCES:
            raise InvalidArgument(
                f"algorithm.score_source must be one of {SCORE_SOURCES}, got {self.algorithm.score_source!r}"
            )
        if self.algorithm.cross_steps and self.algorithm.estimator == "rloo":
            raise InvalidArgument("algorithm.cross_steps has no leave-one-out form; use it with grpo, drgrpo or gigpo")
        if self.loss.importance_correction not in CORRECTION_MODES:
            raise InvalidArgument(
                f"loss.importance_correction must be one of {CORRECTION_MODES}, got {self.loss.importance_correction!r}"
            )
        if self.loss.importance_cap < 1.0:
            raise InvalidArgument(f"loss.importance_cap must be at least 1, got {self.loss.importance_cap}")
        self._validate_sampling()
        if self.loss.agg not in AGG_MODES:
            raise InvalidArgument(f"loss.agg must be one of {AGG_MODES}, got {self.loss.agg!r}")
        if self.vllm.sync not in ("lora", "full"):
            raise InvalidArgument(f"vllm.sync must be 'lora' or 'full', got {self.vllm.sync!r}")
        if self.vllm.url and self.vllm.sync == "lora" and not self.model.lora:
            raise InvalidArgument("vllm.sync 'lora' needs model.lora: true (or use vllm.sync: full)")
        for name, value in (
            ("rollout.groups_per_step", self.rollout.groups_per_step),
            ("rollout.group_size", self.rollout.group_size),
            ("optim.epochs", self.optim.epochs),
            ("optim.mini_batches", self.optim.mini_batches),
            ("optim.micro_batch_size", self.optim.micro_batch_size),
        ):
            if value < 1:
                raise InvalidArgument(f"{name} must be at least 1, got {value}")
        if bool(self.rollout.replay_episodes) != bool(self.rollout.replay_predictions):
            raise InvalidArgument("replay needs both rollout.replay_episodes and rollout.replay_predictions")
        if self.algorithm.filter_zero_variance and self.rollout.group_size < 2:
            raise InvalidArgument("group-relative advantages need rollout.group_size >= 2")
        return self

    def _validate_sampling(self) -> None:
        """The trainer must model the distribution the sampler drew from."""
        if self.rollout.temperature <= 0:
            raise InvalidArgument(
                f"rollout.temperature must be above 0 to train (got {self.rollout.temperature}): greedy decoding "
                "has no log-probabilities to train on; use env.eval_temperature: 0 for greedy evaluation"
            )
        if self.rollout.top_p < 1.0:
            raise InvalidArgument(
                f"rollout.top_p {self.rollout.top_p} samples from a truncated distribution whose log-probabilities the "
                "trainer does not compute, so it would train a different policy than the one that acted; set "
                "rollout.top_p: 1.0"
            )

    @property
    def eval_splits(self) -> list[str]:
        """The held-out splits evaluation runs on."""
        split = self.env.eval_split
        return [split] if isinstance(split, str) else list(split or [])


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    if not isinstance(data, dict):
        raise InvalidArgument(f"{where or 'the config'} must be a mapping, got {type(data).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise InvalidArgument(f"unknown setting(s) {unknown} in {where or 'the config'}; known: {sorted(known)}")
    kwargs = {}
    for key, value in data.items():
        default = known[key].default_factory() if known[key].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default):
            kwargs[key] = _build(type(default), value, f"{where}{key}.")
        elif key == "betas":
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    return cls(**kwargs)


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``section.key=value`` strings applied to a config mapping (values parsed as JSON when they parse)."""
    data = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"--set takes section.key=value (for example run.steps=20), got {item!r}")
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _parse_value(value)
    return data


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML (``.yaml``/``.yml``) or JSON config file as a mapping."""
    path = Path(path)
    if not path.is_file():
        raise InvalidArgument(f"no config file at {path}; the examples are in agentenvs/train/configs/")
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise InvalidArgument(f"{path} must hold a mapping of sections (model, env, rollout, ...)")
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """The config in ``path`` (or the defaults) with ``overrides`` applied, validated."""
    data = read_config_file(path) if path else {}
    data = apply_overrides(data, overrides or [])
    return _build(TrainConfig, data, "").validate()


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    return _build(TrainConfig, data, "").validate()


CONFIG_DIR = Path(__file__).resolve().parent / "configs"
