"""A served shellops session that attacks its sandbox leaves the server up and other sessions working."""

from __future__ import annotations

import requests

import agentenvs
from agentenvs.servers.launch import launch_server

ATTACKS = (
    "<bash>kill -9 -1; kill -9 1</bash>",
    "<bash>bomb() { bomb | bomb & }; bomb; sleep 1</bash>",
    "<bash>nohup sleep 300 >/dev/null 2>&1 &</bash>",
)


def test_attacks_in_one_session_leave_the_server_and_other_sessions_working():
    with launch_server(["shellops"], workers=1) as server:
        client = agentenvs.connect(server.url)
        try:
            attacker, bystander = client.make("shellops"), client.make("shellops")
            options = {"split": "demo", "task_id": "inventory-count-py-files"}
            attacker.reset(seed=0, options=options)
            bystander.reset(seed=0, options=options)
            for action in ATTACKS:
                attacker.step(action)
            assert requests.get(f"{server.url}/healthz", timeout=5).ok
            observation, *_ = bystander.step("<bash>find . -name '*.py' | wc -l</bash>")
            assert observation == "exit code: 0\nstdout:\n5"
            _, reward, terminated, _, _ = attacker.step("<submit>5</submit>")
            assert terminated and reward == 1.0
            attacker.close()
            bystander.close()
        finally:
            client.close()
