"""The Ray actor behind ``RayEnvPool``: a process holding environment sessions by id.

A plain class (``ray.remote`` is applied by the pool), so importing it needs no Ray. Errors of one
session's step are returned as values by :meth:`EnvHost.step_many`, so one bad session does not fail
the others in the same call.
"""

from __future__ import annotations

from typing import Any

from agentenvs.actions import ExtractedAction
from agentenvs.errors import AgentEnvsError, EnvFailed
from agentenvs.protocol import Reset, UnknownSession


class EnvHost:
    """Sessions of environments, made with ``agentenvs.make`` in this actor's process."""

    def __init__(self) -> None:
        self.envs: dict[str, Any] = {}

    def node_id(self) -> str:
        """The Ray node this actor runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def _env(self, session_id: str) -> Any:
        try:
            return self.envs[session_id]
        except KeyError:
            raise UnknownSession(f"no session {session_id} in this actor (closed?)") from None

    def open(self, session_id: str, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        from agentenvs.registry import make

        env = make(name, **kwargs)
        self.envs[session_id] = env
        return env.describe()

    def reset(self, session_id: str, seed: int | None, options: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        return self._env(session_id).reset(seed=seed, options=options)

    def step(self, session_id: str, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self._env(session_id).step(action)

    def step_many(self, items: list[tuple[str, Any]]) -> list[Any]:
        """One answer per ``(session_id, action)``: the step's tuple (a reset's for a
        :class:`~agentenvs.protocol.Reset`), or its error as a value."""
        answers: list[Any] = []
        for session_id, action in items:
            try:
                if isinstance(action, Reset):
                    answers.append(self.reset(session_id, action.seed, action.options))
                else:
                    answers.append(self.step(session_id, action))
            except AgentEnvsError as exc:
                answers.append(exc)
            except Exception as exc:  # an engine crash fails this session's step only
                answers.append(EnvFailed(f"the environment failed: {type(exc).__name__}: {exc}"))
        return answers

    def extract_action(self, session_id: str, response: str) -> ExtractedAction | None:
        return self._env(session_id).extract_action(response)

    def get_state(self, session_id: str) -> dict[str, Any]:
        return self._env(session_id).get_state()

    def set_state(self, session_id: str, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return self._env(session_id).set_state(state)

    def close(self, session_id: str) -> None:
        env = self.envs.pop(session_id, None)
        if env is not None:
            env.close()
