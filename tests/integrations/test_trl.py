"""TRL 1.16's real ``GRPOTrainer`` trains the tiny model through ``EnvRollout`` on the multi-turn bandit:
whole episodes come back as completions, the environment's ids are masked out of the loss, and the
episode return is the reward."""

from __future__ import annotations

import pytest

import agentenvs
from agentenvs.integrations import EpisodeRef
from agentenvs.train import tiny

SMALL = {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}


@pytest.fixture(scope="module", autouse=True)
def tiny_bandit():
    agentenvs.register("bandit-tiny", "agentenvs.train.tiny_bandit:TinyBandit", overwrite=True)


def shorter(completions, **_):
    """A second reward that differs within a group (the untrained model's pulls mostly pay 0)."""
    return [-len(c) / 100 for c in completions]


def grpo(rollout, tmp_path, steps: int = 2):
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from agentenvs.integrations.trl import env_reward

    torch.manual_seed(0)
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer, **SMALL)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=steps,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        learning_rate=1e-3,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[env_reward, shorter],
        args=args,
        train_dataset=rollout.dataset(8, split="train"),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    return trainer, tokenizer


def test_grpo_trainer_runs_multi_turn_episodes_with_env_tokens_masked(tmp_path):
    from agentenvs.integrations.trl import EnvRollout

    rollout = EnvRollout("bandit-tiny", env_kwargs={"horizon": 2}, max_tokens=8)
    trainer, tokenizer = grpo(rollout, tmp_path)
    seen = []
    original = rollout.__call__

    def spy(prompts, trainer_):
        out = original(prompts, trainer_)
        seen.append((prompts, out))
        return out

    trainer.rollout_func = spy
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    assert len(seen) == 2 and trainer.state.global_step == 2
    prompts, out = seen[-1]  # rollout.last_records holds the latest call's episodes
    assert len(prompts) == 4 and prompts[0] == prompts[1]  # one row, num_generations times: one group
    for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_return"):
        assert len(out[key]) == 4, key
    records = rollout.last_records
    assert {r.num_turns for r in records} == {2}  # horizon 2: two pulls, so env text sits between them
    for ids, mask, lp in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
        assert len(ids) == len(mask) == len(lp)
        assert 0 < sum(mask) < len(mask)
        env_text = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if not m])
        assert env_text.count("Arms: ") == 1  # turn 2's observation sits in the completion, masked
        assert all(x == 0.0 for x, m in zip(lp, mask, strict=True) if not m)
    assert out["env_return"] == [r.return_ for r in records]
    ref = EpisodeRef.decode(prompts[0])
    assert records[0].task_id == ref.task_id and records[0].seed == ref.seed
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logged) == 2
    # TRL counts only env_mask=1 ids as completion tokens: the sampled ids, not the observations
    assert logged[-1]["completions/mean_length"] == sum(map(sum, out["env_mask"])) / 4
    changed = any(not (before[k] == v).all() for k, v in trainer.model.named_parameters())
    assert changed  # the optimizer stepped on the episodes


def test_rollout_refuses_a_prompt_that_is_not_an_episode_reference():
    from agentenvs.errors import InvalidArgument
    from agentenvs.integrations.trl import EnvRollout

    with pytest.raises(InvalidArgument, match="episode reference"):
        EnvRollout("bandit-tiny")(["What is 2+2?"], trainer=None)
