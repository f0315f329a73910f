"""Training on delayed rewards: episodes act now, resolve later, and are learned from once backfilled.

The learning test runs the whole lifecycle: the tiny forecaster (agentenvs/train/tiny_forecast.py) plays
pending forecast episodes into a prediction store and an episode file, ``advance`` resolves them with the
world's outcomes, :class:`ReplaySource` hands back the backfilled episodes, GRPO advantages
(``agentenvs.train.advantages``) weight a REINFORCE step. On the held-out test panel's binary questions its
Brier must beat the base-rate baseline (the train panel's frequency) by a clear, paired margin. Held out:
the 90 binary questions of dev and test. Measured on 2 loaded cores (~7 s): Brier 0.250 (untrained, always
0.5) -> 0.214 after 10 rounds of 240 episodes; base rate 0.249; one-sided sign-flip p = 0.016.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import agentenvs
from agentenvs.predictions import PredictionStore
from agentenvs.rollout.driver import RolloutConfig, plan_episodes, run_rollouts
from agentenvs.tasks.forecast.resolver import advance
from agentenvs.train import advantages as adv
from agentenvs.train.replay import ReplaySource, resolution_id
from agentenvs.train.tiny_forecast import ForecasterPolicy, score_gradient

ROUNDS, QUESTIONS, GROUP, LR = 10, 30, 8, 0.15


def binary(split: str) -> list[dict]:
    return [t for t in agentenvs.make("forecast").tasks(split) if t["kind"] == "binary"]


def play(policy, split: str, tasks: list[dict], group: int, out: Path | None, seed: int = 0, **env_kwargs):
    plan = plan_episodes("forecast", split, len(tasks), group, seed=seed, tasks=[t["task_id"] for t in tasks])
    config = RolloutConfig(env_kwargs=env_kwargs, progress=False, concurrency=1)
    return run_rollouts("forecast", policy, episodes=plan, config=config, out=out)


def held_out_brier(policy: ForecasterPolicy, tasks: list[dict]) -> np.ndarray:
    """Per-question Brier of the policy's mean forecast, scored at once (``resolved`` mode)."""
    sigma, policy.sigma = policy.sigma, 0.0
    try:
        scored = [
            r for split in ("dev", "test") for r in play(policy, split, _of(tasks, split), 1, None, mode="resolved")
        ]
        return np.array([1.0 - r.return_ for r in scored])
    finally:
        policy.sigma = sigma


def _of(tasks: list[dict], split: str) -> list[dict]:
    return [t for t in tasks if t["task_id"] in {x["task_id"] for x in binary(split)}]


def one_sided_sign_flip_p(diffs: np.ndarray, rounds: int = 20000) -> float:
    """P(mean of randomly sign-flipped ``diffs`` >= the observed mean): small when diffs are reliably > 0."""
    flips = np.random.default_rng(0).choice([-1.0, 1.0], size=(rounds, len(diffs)))
    return float(np.mean((flips * diffs).mean(axis=1) >= diffs.mean()))


@pytest.mark.slow
def test_training_on_backfilled_rewards_beats_the_base_rate(tmp_path: Path) -> None:
    train, test = binary("train"), binary("dev") + binary("test")
    base_rate = float(np.mean([t["outcome"] for t in train]))
    base = np.array([(base_rate - t["outcome"]) ** 2 for t in test])
    policy, store = ForecasterPolicy(sigma=0.3), tmp_path / "predictions.sqlite"
    replay = ReplaySource([tmp_path / f"round-{r}" for r in range(ROUNDS)], store)
    before = held_out_brier(policy, test)
    for round_ in range(ROUNDS):
        tasks = [train[(round_ * QUESTIONS + i) % len(train)] for i in range(QUESTIONS)]
        played = play(policy, "train", tasks, GROUP, tmp_path / f"round-{round_}", round_, store=str(store))
        assert all(r.return_ == 0.0 and resolution_id(r) for r in played)  # nothing is known when acting
        assert replay.take()[0] == []  # ... nor before the clock moves
        with PredictionStore(store) as predictions:
            assert advance(predictions, 1000)["resolved"] == QUESTIONS * GROUP
        batch, metrics = replay.take()
        assert len(batch) == QUESTIONS * GROUP and metrics["replay/lag_s_median"] > 0
        values = adv.turn_advantages(batch, "grpo")
        policy.theta += LR * np.mean([score_gradient(policy, r, v[-1]) for r, v in zip(batch, values, strict=True)], 0)
    after = held_out_brier(policy, test)
    assert before.mean() == pytest.approx(0.25)
    assert after.mean() < base.mean() - 0.015, (after.mean(), base.mean())
    assert one_sided_sign_flip_p(base - after) < 0.05


def test_replay_hands_out_resolved_episodes_once_and_drops_voided(tmp_path: Path) -> None:
    tasks, store = binary("dev")[:3], tmp_path / "p.sqlite"
    records = play(ForecasterPolicy(sigma=0.0), "dev", tasks, 2, tmp_path / "eps", store=str(store))
    replay = ReplaySource(tmp_path / "eps", store)
    with PredictionStore(store) as predictions:
        predictions.resolve(resolution_id(records[0]), tasks[0]["outcome"])
        predictions.void(resolution_id(records[2]), "annulled")
    batch, metrics = replay.take()
    # both members of group 0 played the same seed and forecast, so they share the one resolved prediction
    assert [r.episode_id for r in batch] == [records[0].episode_id, records[1].episode_id]
    assert metrics["replay/episodes"] == 2
    expected = 1.0 - (0.5 - tasks[0]["outcome"]) ** 2
    assert batch[0].return_ == pytest.approx(expected) and batch[0].steps[-1].info["reward_pending"] is False
    assert replay.take()[0] == []  # handed out once; the voided one never; the rest still pending
    with PredictionStore(store) as predictions:
        advance(predictions, 1000)
    assert [r.episode_id for r in replay.take()[0]] == [records[4].episode_id, records[5].episode_id]


def replay_config(tmp_path: Path, **loss):
    from agentenvs.train.config import config_from_dict

    store, episodes = tmp_path / "p.sqlite", tmp_path / "replay" / "episodes.jsonl"
    return store, episodes, config_from_dict(
        {
            "model": {"path": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
            "env": {"name": "forecast", "max_turns": 1, "kwargs": {"store": str(store)}},
            "rollout": {"groups_per_step": 1, "group_size": 2, "max_tokens": 8, "concurrency": 2,
                        "replay_episodes": str(episodes.parent), "replay_predictions": str(store)},
            "algorithm": {"filter_zero_variance": False},
            "loss": loss,
            "run": {"steps": 1, "out": str(tmp_path / "run"), "progress": False, "torch_threads": 1},
        }
    )  # fmt: skip


def pending(records, store: Path, episodes: Path, resolve: tuple[int, ...] = ()):
    """``records`` marked pending, each with its own prediction, written to the replay file; the members
    in ``resolve`` resolved at once. A from-scratch tiny model writes no valid forecast, so the pending
    episodes are its own rollouts (real token ids and logprobs) given predictions in the store."""
    from agentenvs.rollout.store import EpisodeStore

    marked = []
    with PredictionStore(store) as predictions, EpisodeStore(episodes) as file:
        for index, record in enumerate(records):
            rid = f"replayed-{index}"
            predictions.add(rid, record.task_id, "binary", 0.9, now=0.0)
            if index in resolve:
                predictions.resolve(rid, index % 2)
            info = {**record.steps[-1].info, "reward_pending": True, "resolution_id": rid}
            marked.append(dataclasses.replace(record, steps=[dataclasses.replace(record.steps[-1], info=info)]))
            file.add(marked[-1])
    return marked


def test_agentenvs_train_trains_on_replayed_episodes_and_logs_the_lag(tmp_path: Path) -> None:
    """The reference trainer with a replay source: backfilled episodes join the step's batch, corrected by a
    truncated importance weight against their recorded logprobs (on by default for replayed rows)."""
    from agentenvs.train.trainer import Trainer

    store, episodes, config = replay_config(tmp_path)
    with Trainer(config) as trainer:
        pending(trainer.rollouts.rollout(0), store, episodes, resolve=(0, 1))
        metrics = trainer.train_step()
    assert metrics["replay/episodes"] == 2 and metrics["replay/lag_s_median"] > 1e9  # acted at t=0 (1970)
    assert metrics["batch/episodes"] == 4 and metrics["batch/rows"] == 4
    assert metrics["loss/is_tokens"] > 0 and 0 < metrics["loss/is_weight_mean"] <= metrics["loss/is_weight_max"] <= 2
    assert 0 <= metrics["loss/is_truncated_fraction"] <= 1
    store, episodes, config = replay_config(tmp_path / "off", importance_correction="none")
    with Trainer(config) as trainer:
        pending(trainer.rollouts.rollout(0), store, episodes, resolve=(0, 1))
        assert "loss/is_tokens" not in trainer.train_step()


def test_a_pending_episode_is_trained_once_with_its_whole_group_never_on_its_placeholder(tmp_path: Path) -> None:
    from agentenvs.train.trainer import Trainer

    store, episodes, config = replay_config(tmp_path)
    with Trainer(config) as trainer:
        records = pending(trainer.rollouts.rollout(0), store, episodes, resolve=(0,))
        assert [r.reward_pending for r in records] == [True, True]
        values, keep = trainer.advantages(records)
        assert keep == [False, False] and values == [[], []]  # the reward 0 is a placeholder
        assert trainer.replay.take()[0] == []  # member 1 still waits: its group is not handed out in part
        with PredictionStore(store) as predictions:
            predictions.resolve("replayed-1", 1)
        batch, metrics = trainer.replay.take()
        assert [r.episode_id for r in batch] == [r.episode_id for r in records] and metrics["replay/groups"] == 1
        assert not any(r.reward_pending for r in batch)
        assert trainer.replay.take()[0] == []


def test_a_backfilled_episode_takes_the_resolved_outcome_not_only_the_reward(tmp_path: Path) -> None:
    from agentenvs.predictions import Prediction
    from agentenvs.train.replay import backfill

    tasks = binary("dev")[:1]
    (record,) = play(ForecasterPolicy(sigma=0.0), "dev", tasks, 1, None, store=str(tmp_path / "p.sqlite"))
    assert record.reward_pending
    resolved = Prediction(
        "r", tasks[0]["task_id"], "binary", 0.9, {}, "resolved", 0.0, 1, {"reward": 0.99, "success": 1.0}
    )
    filled = backfill(record, resolved)
    assert (filled.success, filled.score, filled.return_, filled.end_reason) == (True, 0.99, 0.99, "success")
    assert filled.failure_cause == "none" and filled.success_turn == filled.steps[-1].turn
    assert not filled.reward_pending and filled.steps[-1].info["success"] is True
    failed = backfill(record, dataclasses.replace(resolved, scores={"reward": 0.2, "success": 0.0}))
    assert (failed.success, failed.end_reason, failed.success_turn) == (False, "failure", None)
