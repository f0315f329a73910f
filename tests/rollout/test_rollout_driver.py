"""The driver in-process and against real environment servers on 127.0.0.1."""

from __future__ import annotations

import json
import time

import pytest
from conftest import FLAKY_SERVE_ARG, PYTHONPATH

from agentenvs import panels
from agentenvs.cli import main as cli_main
from agentenvs.client import EnvPool
from agentenvs.errors import InvalidArgument
from agentenvs.rollout import read_jsonl
from agentenvs.rollout.driver import RolloutConfig, plan_episodes, run_rollouts
from agentenvs.rollout.factory import make_policy, parse_openai_spec
from agentenvs.rollout.llm import PolicyError
from agentenvs.rollout.policy import Actor, Decision, Policy, whole_response_action
from agentenvs.rollout.scripted import ExpertPolicy, RandomPolicy
from agentenvs.servers.launch import launch_server

QUIET = RolloutConfig(progress=False, concurrency=4)


def comparable(record) -> dict:
    """A record without what legitimately differs between runs (clock readings)."""
    data = record.to_dict()
    data.pop("timings")
    data.pop("started_at")
    return data


class Scripted(Policy):
    """Answers every turn with the same text, optionally after a pause or with an error."""

    name = "scripted"

    def __init__(self, response: str = "good", pause_s: float = 0.0, error: Exception | None = None):
        self.response, self.pause_s, self.error = response, pause_s, error

    def begin(self, context):
        policy = self

        class _Actor(Actor):
            def act(self, observation, info):
                time.sleep(policy.pause_s)
                if policy.error is not None:
                    raise policy.error
                return Decision(policy.response, context.extract_action(policy.response))

        return _Actor()


# ---------------------------------------------------------------------- planning and groups


def test_plan_groups_share_task_and_seed_and_ids_are_stable():
    tasks = [t["task_id"] for t in panels.load_panel("bandit", "test")]
    plan = plan_episodes("bandit", "test", 3, 4, seed=5, tasks=tasks)
    assert len(plan) == 12 and len({s.episode_id for s in plan}) == 12
    for group in range(3):
        members = plan[group * 4 : group * 4 + 4]
        shared = {(s.task_id, s.seed, s.group_id) for s in members}
        assert shared == {(tasks[group], members[0].seed, members[0].group_id)}
        assert [s.member for s in members] == [0, 1, 2, 3]
    assert plan == plan_episodes("bandit", "test", 3, 4, seed=5, tasks=tasks)
    assert plan != plan_episodes("bandit", "test", 3, 4, seed=6, tasks=tasks)
    shuffled = plan_episodes("bandit", "test", 3, 1, seed=5, tasks=tasks, shuffle=True)
    assert [s.task_id for s in shuffled] != tasks[:3]
    with pytest.raises(InvalidArgument, match="at least 1"):
        plan_episodes("bandit", "test", 0)


def test_random_rollouts_fill_every_record_field_and_groups_diverge_only_by_policy(tmp_path):
    records = run_rollouts("bandit", RandomPolicy(seed=1), n=2, group_size=3, config=QUIET, out=tmp_path)
    assert len(records) == 6
    assert list(read_jsonl(tmp_path / "episodes.jsonl")) != []
    for record in records:
        assert record.env == "bandit" and record.env_version == "1" and record.split == "test"
        assert record.panel_hash == panels.panel_hash("bandit", "test")
        assert record.task_type and record.num_turns == len(record.steps) > 0
        assert record.return_ == pytest.approx(sum(s.reward for s in record.steps))
        assert record.end_reason in ("success", "failure") and record.failure_cause in ("none", "policy")
        assert (record.failure_cause == "none") == record.success
        assert record.success_turn == (record.num_turns if record.success else None)
        assert [s.turn for s in record.steps] == list(range(1, record.num_turns + 1))
        assert all("admissible_actions" not in s.info and "privileged" not in s.info for s in record.steps)
        assert record.steps[-1].info.get("end_reason") == record.end_reason
        assert record.tokens is None and record.policy == {"name": "random", "seed": 1}
        assert record.timings["total_s"] >= record.timings["env_s"] > 0
    first_group = records[:3]
    assert len({r.steps[0].observation for r in first_group}) == 1  # same task and seed: same start
    assert len({tuple(s.action for s in r.steps) for r in first_group}) > 1  # the policy's seeds differ


def test_rollouts_are_deterministic_across_runs_and_concurrency():
    one = run_rollouts("bandit", RandomPolicy(), n=3, group_size=2, config=RolloutConfig(progress=False, concurrency=1))
    many = run_rollouts("bandit", RandomPolicy(), n=3, group_size=2, config=QUIET)
    assert [comparable(r) for r in one] == [comparable(r) for r in many]


def test_expert_is_made_privileged_and_solves_bandit():
    records = run_rollouts("bandit", ExpertPolicy(), n=3, config=QUIET)
    assert all(r.success and r.score == 1.0 and r.failure_cause == "none" for r in records)
    assert all("privileged" not in s.info for r in records for s in r.steps)


def test_max_turns_caps_episodes():
    records = run_rollouts("bandit", RandomPolicy(), n=2, config=RolloutConfig(progress=False, max_turns=3))
    assert [r.num_turns for r in records] == [3, 3]
    assert all(r.end_reason == "max_turns" and r.steps[-1].truncated for r in records)


def test_resume_skips_finished_episodes(tmp_path):
    run_rollouts("bandit", RandomPolicy(), n=2, group_size=2, config=QUIET, out=tmp_path)
    fresh = []
    records = run_rollouts(
        "bandit", RandomPolicy(), n=3, group_size=2, config=QUIET, out=tmp_path, on_record=fresh.append
    )
    assert len(records) == 6 and len(fresh) == 2
    assert len(list(read_jsonl(tmp_path / "episodes.jsonl"))) == 6


# ---------------------------------------------------------------------- failure causes


def test_engine_exception_is_infra_and_the_run_goes_on():
    records = run_rollouts("flaky", Scripted(), n=2, config=QUIET)
    steady, broken = records
    assert steady.success and steady.failure_cause == "none" and steady.num_turns == 3
    assert broken.failure_cause == "infra" and broken.end_reason == "error" and not broken.usable_for_training
    assert "the engine crashed" in broken.error and broken.num_turns == 1


def test_time_limit_gives_timeout():
    config = RolloutConfig(progress=False, time_limit_s=0.3)
    [record] = run_rollouts("flaky", Scripted(pause_s=0.2), n=1, config=config)
    assert record.failure_cause == "timeout" and record.end_reason == "error"
    assert "time limit" in record.error and 1 <= record.num_turns < 3


def test_unparsable_responses_are_invalid_steps_and_parse_failures():
    [record] = run_rollouts("bandit", Scripted("<action>"), n=1, config=RolloutConfig(progress=False, max_turns=2))
    assert record.failure_cause == "parse" and record.end_reason == "max_turns"
    assert all(s.action == "" and s.action_span is None and s.info["action_valid"] is False for s in record.steps)


def test_a_model_that_cannot_answer_is_a_policy_failure():
    [record] = run_rollouts("bandit", Scripted(error=PolicyError("context full")), n=1, config=QUIET)
    assert record.failure_cause == "policy" and record.error == "PolicyError: context full"


def test_action_span_points_into_the_response():
    [record] = run_rollouts("bandit", Scripted("I think <action>pull[1]</action>"), n=1, config=QUIET)
    step = record.steps[0]
    assert step.response[slice(*step.action_span)] == step.action == "pull[1]" and step.info["action_valid"]


# ---------------------------------------------------------------------- policy specs and the CLI


def test_policy_specs():
    assert isinstance(make_policy("random", seed=3), RandomPolicy)
    assert isinstance(make_policy("expert"), ExpertPolicy)
    assert parse_openai_spec("http://127.0.0.1:8000/v1") == ("http://127.0.0.1:8000/v1", None)
    assert parse_openai_spec("http://127.0.0.1:8000/v1:smollm2") == ("http://127.0.0.1:8000/v1", "smollm2")
    assert parse_openai_spec("http://h:8000:Qwen/Qwen2.5-1.5B") == ("http://h:8000", "Qwen/Qwen2.5-1.5B")
    with pytest.raises(InvalidArgument, match="random, expert, smollm2"):
        make_policy("gpt")
    with pytest.raises(InvalidArgument, match="openai:URL"):
        make_policy("openai:localhost")
    assert whole_response_action("") is None


def test_cli_rollout_writes_records_and_a_summary(tmp_path, capsys):
    args = ["rollout", "--env", "bandit", "--policy", "random", "--n", "2", "--group-size", "2"]
    assert cli_main([*args, "--out", str(tmp_path), "--no-progress", "--max-turns", "4"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 4 and summary["mean_turns"] == 4
    assert len(list(read_jsonl(tmp_path))) == 4
    assert "episodes.jsonl" in capsys.readouterr().out


# ---------------------------------------------------------------------- real servers


@pytest.fixture(scope="module")
def servers():
    started = []
    try:
        for _ in range(2):
            started.append(launch_server(["bandit", FLAKY_SERVE_ARG], workers=2, env_vars=PYTHONPATH))
        yield started
    finally:
        for server in started:
            server.stop()


def test_server_pool_gives_the_same_episodes_as_in_process(servers):
    urls = [s.url for s in servers]
    local = run_rollouts("bandit", RandomPolicy(), n=3, group_size=2, config=QUIET)
    remote = run_rollouts("bandit", RandomPolicy(), n=3, group_size=2, config=QUIET, servers=urls)
    assert [comparable(r) for r in remote] == [comparable(r) for r in local]
    expert = run_rollouts("bandit", ExpertPolicy(), n=2, config=QUIET, servers=urls)
    assert all(r.success for r in expert)


def test_server_failures_are_infra(servers):
    records = run_rollouts("flaky", Scripted(), n=2, config=QUIET, servers=[servers[0].url])
    assert [r.failure_cause for r in records] == ["none", "infra"]


def test_a_server_that_dies_mid_episode_is_infra():
    server = launch_server(["bandit"], workers=1)
    try:

        class KillsServer(Scripted):
            def begin(self, context):
                actor = super().begin(context)
                original = actor.act

                def act(observation, info):
                    if info.get("turn") == 2:
                        server.stop()
                    return original(observation, info)

                actor.act = act
                return actor

        pool = EnvPool([server.url], retries=1)
        [record] = run_rollouts("bandit", KillsServer("pull[0]"), n=1, config=QUIET, servers=pool)
        pool.close()
    finally:
        server.stop()
    assert record.failure_cause == "infra" and record.num_turns == 2, record.error
