"""POST /v1/predictions/resolve on a real server: token-only, resolves once, clear errors (servers/predictions.py)."""

from __future__ import annotations

from pathlib import Path

from conftest import Api

from agentenvs.predictions import PredictionStore
from agentenvs.servers.launch import launch_server

TOKEN = "forecast-token"


def test_resolve_route_needs_a_token_and_resolves_once(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite"
    with PredictionStore(path) as store:
        store.add("r1", "q1", "binary", 0.8)
        store.add("r2", "q2", "choice", {"A": 0.3, "B": 0.7}, {"options": ["A", "B"]})
        store.add("r3", "q2", "choice", {"A": 0.5, "B": 0.5}, {"options": ["A", "B"]})
    server = launch_server(["bandit"], workers=1, token=TOKEN, env_vars={"AGENTENVS_FORECAST_STORE": str(path)})
    open_server = launch_server(["bandit"], workers=1, env_vars={"AGENTENVS_FORECAST_STORE": str(path)})
    try:
        api, anonymous = Api(server.url, TOKEN), Api(server.url)
        route = "/v1/predictions/resolve"
        assert anonymous.call("POST", route, {"id": "r1", "outcome": 1}).status_code == 401
        answer = Api(open_server.url).call("POST", route, {"id": "r1", "outcome": 1})
        assert answer.status_code == 401 and "--token" in answer.json()["error"]["message"]
        assert api.call("POST", route, {"id": "r1", "outcome": 1}).json() == {"resolved": 1}
        assert api.call("POST", route, {"id": "r1", "outcome": True}).json() == {"resolved": 0}
        conflict = api.call("POST", route, {"id": "r1", "outcome": 0})
        assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "prediction_conflict"
        assert api.call("POST", route, {"id": "nope", "outcome": 1}).status_code == 404
        assert api.call("POST", route, {"id": "q2", "outcome": "C", "by_question": True}).status_code == 422
        assert api.call("POST", route, {"id": "r1"}).status_code == 400
        assert api.call("POST", route, {"id": "q2", "outcome": "B", "by_question": True}).json() == {"resolved": 2}
    finally:
        server.stop()
        open_server.stop()
    with PredictionStore(path) as store:
        assert store.counts() == {"pending": 0, "resolved": 3, "voided": 0}
        assert store.get("r1").outcome == 1 and store.get("r2").scores["brier"] > 0
