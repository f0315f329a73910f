"""skyrl-gym's own registry and ``make`` build our environment, which plays a multi-turn episode
through ``init``/``step`` exactly as SkyRL's generator calls them."""

from __future__ import annotations

import pytest
import skyrl_gym

import agentenvs


@pytest.fixture(scope="module", autouse=True)
def registered():
    agentenvs.register("bandit-tiny", "agentenvs.train.tiny_bandit:TinyBandit", overwrite=True)
    from agentenvs.integrations.skyrl import register_skyrl

    return register_skyrl()


def play(env, replies):
    messages, _ = env.init([{"role": "user", "content": "ignored"}])
    outputs = []
    for reply in replies:
        messages.append({"role": "assistant", "content": reply})
        out = env.step(reply)
        outputs.append(out)
        messages += out["observations"]
        if out["done"]:
            break
    return messages, outputs


def test_skyrl_make_plays_a_multi_turn_episode(registered):
    from agentenvs.integrations.skyrl import AgentEnvsTextEnv, dataset_rows

    row = dataset_rows("bandit-tiny", 1, split="train", env_kwargs={"horizon": 3})[0]
    assert row["env_class"] == registered == "agentenvs"
    env = skyrl_gym.make(row["env_class"], env_config={"env_kwargs": {"horizon": 3}}, extras=row)
    assert isinstance(env, AgentEnvsTextEnv) and isinstance(env, skyrl_gym.Env)
    messages, outputs = play(env, ["pull[0]", "I pick gold", "nonsense"])
    assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[1]["content"].startswith("Arms: ")
    assert env.max_turns == 3 and len(outputs) == 3
    assert [o["done"] for o in outputs] == [False, False, True]
    assert outputs[0]["postprocessed_action"] == "pull[0]" and outputs[1]["postprocessed_action"] == "gold"
    assert outputs[2]["metadata"]["action_valid"] is False and outputs[2]["observations"] == []
    assert "score" in outputs[0]["metadata"]
    # the same episode played directly gives the same rewards: nothing is lost in between
    local = agentenvs.make("bandit-tiny", horizon=3)
    ref = row["agentenvs"]
    local.reset(seed=ref["seed"], options={"task_id": ref["task_id"], "split": "train"})
    direct = [local.step(a)[1] for a in ("pull[0]", "gold", "")]
    assert [o["reward"] for o in outputs] == direct
    metrics = env.get_metrics()
    assert metrics["turns"] == 3 and metrics["return"] == pytest.approx(sum(direct))
    assert AgentEnvsTextEnv.aggregate_metrics([metrics, metrics])["turns"] == 3
    env.close()


def test_a_row_without_an_episode_says_how_to_build_one():
    with pytest.raises(ValueError, match="dataset_rows"):
        skyrl_gym.make("agentenvs", env_config={}, extras={"prompt": []})
