"""OpenEnv's WebSocket session protocol beside protocol v1, so OpenEnv clients use our environments unchanged.

OpenEnv (``openenv-core``; what TRL, torchforge and SkyRL's OpenEnv integrations speak) opens one
environment per WebSocket at ``{base_url}/ws`` and exchanges JSON messages: ``{"type": "reset", "data":
{...}}``, ``{"type": "step", "data": {action fields}}``, ``{"type": "state"}``, ``{"type": "close"}``; the
server answers ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}``,
``{"type": "state", "data": {"episode_id", "step_count", ...}}`` or ``{"type": "error", "data": {"message",
"code"}}``. Here the socket's path names the environment: ``/openenv/{env}/ws`` (so an OpenEnv client's
``base_url`` is ``http://host:port/openenv/bandit``), and plain ``/ws`` serves the only (or first) one.
Each socket is one session of the same session manager as protocol v1: same workers, limits, leases.

Reset data: ``seed``, ``task_id``, ``split`` (or ``options``). Step data: ``{"action": "pull[0]"}`` (the
action itself) or ``{"message": "<a model reply>"}`` (the server finds the action with the environment's
own ``extract_action``). The observation holds ``text``, the step-record ``info`` subset and ``action``
(and ``instructions`` after a reset). Tokens: ``Authorization: Bearer`` or ``?token=`` on the URL.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs

from agentenvs import protocol
from agentenvs.errors import AgentEnvsError, InvalidArgument
from agentenvs.rollout.records import step_info
from agentenvs.servers.auth import Authenticator
from agentenvs.servers.sessions import SessionManager

PREFIX = "/openenv/"


def env_for_path(path: str, served: list[str]) -> str | None:
    """The environment a WebSocket path names (None: not an OpenEnv route)."""
    if path == "/ws":
        return served[0] if served else None
    if path.startswith(PREFIX) and path.endswith("/ws"):
        return path[len(PREFIX) : -len("/ws")] or None
    return None


class OpenEnvSession:
    """One WebSocket's session: OpenEnv messages in, session-manager calls, OpenEnv answers out."""

    def __init__(self, manager: SessionManager, env: str, owner: bytes | None):
        self.manager, self.env, self.owner = manager, env, owner
        self.session_id: str | None = None
        self.description: dict[str, Any] = {}
        self.episode = 0
        self.turn = 0

    def open(self) -> None:
        opened = self.manager.create(protocol.CreateSession(env=self.env), self.owner)
        self.session_id, self.description = opened["session_id"], opened["env"]

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to one message (None for ``close``); our errors become OpenEnv error messages."""
        kind, data = message.get("type"), message.get("data") or {}
        try:
            if self.session_id is None and kind in ("reset", "step", "state"):
                self.open()  # on the first message, so a failure to open is answered as an OpenEnv error
            if kind == "reset":
                return self.reset(data)
            if kind == "step":
                return self.step(data)
            if kind == "state":
                state = {"episode_id": f"{self.session_id}/{self.episode}", "step_count": self.turn, "env": self.env}
                return {"type": "state", "data": state}
            if kind == "close":
                return None
            return error("UNKNOWN_TYPE", f"unknown message type {kind!r}: send reset, step, state or close")
        except AgentEnvsError as exc:
            return error(exc.code, str(exc))

    def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        options = dict(data.get("options") or {})
        options.update({key: data[key] for key in ("task_id", "split") if data.get(key) is not None})
        request = protocol.ResetRequest(seed=data.get("seed"), options=options or None)
        body = json.loads(self.manager.reset(self.session_id, request, self.owner))
        self.episode += 1
        self.turn = 0
        observation = {"text": body["observation"], "info": step_info(body["info"]), "action": None}
        observation["info"]["task_id"] = body["info"].get("task_id")
        observation["instructions"] = self.description.get("instructions", "")
        return observed(observation, None, False)

    def step(self, data: dict[str, Any]) -> dict[str, Any]:
        if isinstance(data.get("action"), str):
            action = data["action"]
        elif isinstance(data.get("message"), str):
            body = json.loads(self.manager.extract_action(self.session_id, data["message"], self.owner))
            action = (body.get("extracted") or {}).get("action", "")
        else:
            raise InvalidArgument('a step needs {"action": "<action>"} or {"message": "<model reply>"}')
        request = protocol.StepRequest(action=action, turn=self.turn)
        body = json.loads(self.manager.step(self.session_id, request, self.owner))
        self.turn += 1
        observation = {"text": body["observation"], "info": step_info(body["info"]), "action": action}
        return observed(observation, body["reward"], bool(body["terminated"] or body["truncated"]))

    def close(self) -> None:
        if self.session_id is not None:
            self.manager.close(self.session_id, self.owner)


def observed(observation: dict[str, Any], reward: float | None, done: bool) -> dict[str, Any]:
    return {"type": "observation", "data": {"observation": observation, "reward": reward, "done": done}}


def error(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "data": {"code": code, "message": message}}


async def serve_websocket(scope: dict[str, Any], receive: Any, send: Any, manager: SessionManager, executor: Any):
    """Run one OpenEnv WebSocket (an ASGI ``websocket`` scope) until the client closes it."""
    env = env_for_path(scope["path"], sorted(manager.descriptions))
    if (await receive())["type"] != "websocket.connect":
        return
    if env is None:
        await send({"type": "websocket.close", "code": 1008, "reason": "OpenEnv routes: /ws or /openenv/{env}/ws"})
        return
    loop = asyncio.get_running_loop()
    await send({"type": "websocket.accept"})
    try:
        session = OpenEnvSession(manager, env, owner_of(scope, manager))
    except AgentEnvsError as exc:  # a missing or wrong token
        await send({"type": "websocket.send", "text": json.dumps(error(exc.code, str(exc)))})
        await send({"type": "websocket.close", "code": 1008})
        return
    try:
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                return
            text = event.get("text") or (event.get("bytes") or b"").decode("utf-8", "replace")
            try:
                message = json.loads(text)
            except ValueError as exc:
                answer: dict[str, Any] | None = error("INVALID_JSON", f"invalid JSON: {exc}")
            else:
                answer = await loop.run_in_executor(executor, session.answer, message)
            if answer is None:
                await send({"type": "websocket.close", "code": 1000})
                return
            await send({"type": "websocket.send", "text": json.dumps(answer)})
    finally:
        await loop.run_in_executor(executor, session.close)


def owner_of(scope: dict[str, Any], manager: SessionManager) -> bytes | None:
    """The owner digest from ``Authorization: Bearer`` or ``?token=`` (raises ``Unauthorized``)."""
    headers = {name.decode("latin-1").title(): value.decode("latin-1") for name, value in scope.get("headers", [])}
    token = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    if token and "Authorization" not in headers:
        headers["Authorization"] = f"Bearer {token[0]}"
    return Authenticator(manager.config.tokens)(headers)
