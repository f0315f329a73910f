"""The HTTP client of protocol v1: ``connect(url).make(name)`` gives a ``RemoteEnv``, a real ``gymnasium.Env``.

Every call is safe to retry, so transport failures (a reset connection, a keep-alive connection the server
closed while the client was thinking) are retried instead of surfacing: a step carries ``turn`` and the
server answers a repeated turn from its stored answer without stepping twice; a reset always carries a
seed (drawn here from the env's own generator when the caller gives none), so repeating it lands in the
same state; opening a session carries an idempotency key made up here, so a repeated create answers the
session the first attempt opened instead of opening a second one. Error answers become the matching
``agentenvs.errors`` / ``agentenvs.protocol`` exceptions.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import gymnasium as gym
from gymnasium import spaces

from agentenvs import protocol
from agentenvs.actions import ExtractedAction, extract_action
from agentenvs.errors import AgentEnvsError, InvalidActionType, InvalidArgument
from agentenvs.protocol import AtCapacity, ServerUnreachable, SessionBusy
from agentenvs.step_batcher import StepBatcher
from agentenvs.transport import TransportFailed, TransportTimeout, transport_for

DEFAULT_TIMEOUT_S = (5.0, 120.0)
"""(connect, read) seconds; the read limit is above the server's default step limit, so 504 comes first."""


class Client:
    """A connection to one server: keep-alive connections (``agentenvs/transport.py``), the token, timeouts
    and retries. ``pool_size`` bounds the connections requests keeps for an ``https://`` or proxied server;
    ``transport="requests"`` sends every call through requests."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float | tuple[float, float] = DEFAULT_TIMEOUT_S,
        retries: int = 4,
        backoff_s: float = 0.05,
        pool_size: int = 64,
        batch_steps: bool = False,
        transport: str = "auto",
    ):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff_s = backoff_s
        self.pool_size = pool_size
        self.transport = transport
        self._transport = self._new_transport()
        self.batcher = StepBatcher(self) if batch_steps else None
        """With ``batch_steps``, steps of this client's sessions made at the same time share one batch call."""

    def _new_transport(self) -> Any:
        headers = {"Accept": "application/json"} | ({"Authorization": f"Bearer {self.token}"} if self.token else {})
        return transport_for(self.url, headers, self.timeout, self.pool_size, self.transport)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_transport", "batcher")} | {
            "batch_steps": self.batcher is not None
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        batch_steps = state.pop("batch_steps")
        self.__dict__.update(state)
        self._transport = self._new_transport()
        self.batcher = StepBatcher(self) if batch_steps else None

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        retry: bool = True,
        busy_wait_s: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """The decoded JSON answer of one call (None for 204); an error answer raises its exception.

        ``retry`` repeats the call after a transport failure; ``busy_wait_s`` also waits out ``session_busy``
        answers for that long (a retried step whose first attempt is still running on the server).
        """
        data = None if body is None else protocol.dumps(body)
        if data is not None:
            headers = {"Content-Type": "application/json"} | (headers or {})
        attempts = itertools.count()
        deadline = time.monotonic() + busy_wait_s
        while True:
            attempt = next(attempts)
            try:
                answer = self._transport.send(method, path, data, headers)
            except TransportFailed as exc:
                if not retry or attempt >= self.retries:
                    raise ServerUnreachable(
                        f"{method} {self.url}{path} failed after {attempt + 1} attempt(s): {exc}; is the server up?"
                    ) from None
                time.sleep(self.backoff_s * (2**attempt) if attempt else 0.0)
                continue
            except TransportTimeout as exc:
                raise protocol.StepTimeout(
                    f"{method} {self.url}{path}: no answer within {self.timeout} s ({exc})"
                ) from None
            if answer.status == 204:
                return None
            payload = answer.payload()
            if answer.status < 400:
                return payload
            error = protocol.error_from_answer(answer.status, payload, answer.headers.get("Retry-After"))
            if isinstance(error, SessionBusy) and time.monotonic() < deadline:
                time.sleep(self.backoff_s)
                continue
            raise error

    def call(
        self,
        name: str,
        session_id: str | None = None,
        body: Any = None,
        *,
        busy_wait_s: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """:meth:`request` on the route ``name`` of ``protocol.ROUTES`` (the table the server is built from)."""
        route = protocol.ROUTE[name]
        return self.request(route.method, route.url(session_id), body, busy_wait_s=busy_wait_s, headers=headers)

    def envs(self) -> dict[str, Any]:
        """The served environments' descriptions, by name."""
        return self.call("envs")["envs"]

    def health(self) -> dict[str, Any]:
        return self.call("healthz")

    def make(self, name: str, *, privileged: bool = False, **kwargs: Any) -> RemoteEnv:
        """Open a session of environment ``name`` (keywords go to its constructor on the server)."""
        return RemoteEnv(self, name, privileged=privileged, **kwargs)

    def step_many(self, envs: Sequence[RemoteEnv], actions: Sequence[Any]) -> list[Any]:
        """Step many sessions of this server in one ``POST /v1/batch/step`` (safe to retry, like ``step``).

        An action may be a :class:`~agentenvs.protocol.Reset`: that session starts its next episode in
        the same call. Returns one item per env: the ``(observation, reward, terminated, truncated, info)``
        tuple (``(observation, info)`` for a reset), or the exception of that item (which is returned,
        not raised, so one failed session does not hide the rest).
        """
        check_pairs(envs, actions)
        if any(env.client is not self for env in envs):
            raise InvalidArgument("step_many takes envs of this client only (group an EnvPool's envs by env.client)")
        items = [env._batch_item(action) for env, action in zip(envs, actions, strict=True)]
        busy_wait_s = max((env.step_timeout_s for env in envs), default=0.0)
        answers = self.call("batch_step", body={"steps": items}, busy_wait_s=busy_wait_s)["results"]
        results: list[Any] = []
        for env, action, answer in zip(envs, actions, answers, strict=True):
            if "error" in answer:
                results.append(protocol.error_from_answer(0, answer))
            elif isinstance(action, protocol.Reset):
                results.append(env._accept_reset(answer))
            else:
                results.append(env._accept(protocol.StepAnswer.from_json(answer)))
        return results

    def close(self) -> None:
        self._transport.close()


def connect(url: str, token: str | None = None, **options: Any) -> Client:
    """A client of the server at ``url``; ``options`` are :class:`Client`'s (timeout, retries, pool_size,
    batch_steps, transport)."""
    return Client(url, token, **options)


class RemoteEnv(gym.Env[str, str]):
    """An environment served over HTTP with the public API of ``TextEnv``."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    def __init__(self, client: Client, name: str, *, privileged: bool = False, **kwargs: Any):
        self.client = client
        self.name = name
        self.kwargs = kwargs
        self.privileged = privileged
        request = protocol.CreateSession(env=name, kwargs=kwargs, privileged=privileged)
        key = {protocol.IDEMPOTENCY_HEADER: secrets.token_hex(16)}  # a retried create answers this same session
        answer = client.call("create_session", body=request.to_json(), headers=key)
        self.session_id: str = answer["session_id"]
        self.lease_ttl_s: float = answer["lease_ttl_s"]
        self.step_timeout_s: float = answer["step_timeout_s"]
        """The server's step limit: how long a retried step waits out its first attempt (``session_busy``)."""
        self._description: dict[str, Any] = answer["env"]
        self.version = self._description.get("version", "")
        self.max_turns = self._description.get("max_turns")
        self.max_action_chars = self._description.get("max_action_chars", 4096)
        from agentenvs.core import TEXT_CHARSET, TextEnv

        self.observation_space = spaces.Text(
            max_length=TextEnv.max_observation_chars, min_length=0, charset=TEXT_CHARSET
        )
        self.action_space = spaces.Text(max_length=self.max_action_chars, min_length=0, charset=TEXT_CHARSET)
        self.render_mode = None
        self._turn = 0
        self._done = False
        self._closed = False
        self._last_observation = ""
        self._parser: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteEnv({self.name!r}, session={self.session_id[:8]}..., url={self.client.url!r})"

    @property
    def path(self) -> str:
        """The session's own route (``GET`` is its turn, done flag and worker)."""
        return protocol.ROUTE["session_info"].url(self.session_id)

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def done(self) -> bool:
        return self._done

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        seed = seed_for_reset(self, seed)
        return self._accept_reset(self.client.call("reset", self.session_id, {"seed": seed, "options": options}))

    def _accept_reset(self, answer: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._turn, self._done = 0, False
        self._last_observation = answer["observation"]
        return answer["observation"], answer["info"]

    def _batch_item(self, action: Any) -> dict[str, Any]:
        """This session's item in a batch call: its step, or its reset for a :class:`~agentenvs.protocol.Reset`."""
        if isinstance(action, protocol.Reset):
            seed = seed_for_reset(self, action.seed)
            return {"session_id": self.session_id, "reset": {"seed": seed, "options": action.options}}
        return {"session_id": self.session_id, "action": action, "turn": self._turn}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            try:  # JSON values go to the server, which answers 422 invalid_action_type like TextEnv
                protocol.dumps(action)
            except (TypeError, ValueError):
                raise InvalidActionType(f"the action must be a str, got {type(action).__name__}") from None
        with self._lock:
            if self.client.batcher is not None:
                return self.client.batcher.step(self, action)
            return self._step_alone(action)

    def _step_alone(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One step on the single-step route (retried on a transport failure, like every call)."""
        body = {"action": action, "turn": self._turn}
        answer = self.client.call("step", self.session_id, body, busy_wait_s=self.step_timeout_s)
        return self._accept(protocol.StepAnswer.from_json(answer))

    def _accept(self, answer: protocol.StepAnswer) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn = answer.info.get("turn", self._turn + 1)
        self._done = answer.terminated or answer.truncated
        self._last_observation = answer.observation
        return answer.as_tuple()

    def get_state(self) -> dict[str, Any]:
        return self.client.call("get_state", self.session_id)["state"]

    def set_state(self, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        answer = self.client.call("set_state", self.session_id, {"state": state})
        self._turn = answer["info"].get("turn", 0)
        self._done = bool(answer["info"].get("end_reason"))
        self._last_observation = answer["observation"]
        return answer["observation"], answer["info"]

    def describe(self) -> dict[str, Any]:
        return dict(self._description)

    def extract_action(self, response: str) -> ExtractedAction | None:
        """The action in a full model response and its span, by the environment's own grammar.

        An environment on the default grammar is parsed here; one with its own parser (which may depend on
        the episode, such as the bandit's arm names) is parsed by its instance on the server, so the result
        is exactly what the in-process environment would give.
        """
        if self._parser is None:
            self._parser = extract_action if _uses_default_grammar(self.name) else self._remote_extract
        return self._parser(response)

    def _remote_extract(self, response: str) -> ExtractedAction | None:
        found = self.client.call("extract_action", self.session_id, {"response": response})["extracted"]
        return None if found is None else ExtractedAction(found["action"], found["start"], found["end"])

    def render(self) -> str | None:
        return self._last_observation

    def close(self) -> None:
        """Close the session on the server (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(AgentEnvsError):
            self.client.call("close", self.session_id)


def seed_for_reset(env: gym.Env, seed: int | None) -> Any:
    """The seed a remote reset sends: the caller's (seeding ``env.np_random`` as gymnasium expects), or
    one drawn from the env's own generator, so a retried or replayed reset lands in the same state. An
    invalid seed is passed on for the environment to refuse with its own error."""
    if seed is None:
        gym.Env.reset(env, seed=None)
        return int(env.np_random.integers(0, 2**31 - 1))
    if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0:
        gym.Env.reset(env, seed=seed)
    return seed


def check_pairs(envs: Sequence[Any], actions: Sequence[Any]) -> None:
    if len(envs) != len(actions):
        raise InvalidArgument(f"step_many got {len(envs)} envs and {len(actions)} actions: give one action per env")


def batch_groups(envs: Sequence[Any], actions: Sequence[Any], key: Callable[[Any], Any]) -> list[list[int]]:
    """The indexes of ``envs`` grouped by ``key(env)`` (the client or actor that steps them in one call),
    after checking that every env has its action."""
    check_pairs(envs, actions)
    groups: dict[int, list[int]] = {}
    for index, env in enumerate(envs):
        groups.setdefault(id(key(env)), []).append(index)
    return list(groups.values())


def _uses_default_grammar(name: str) -> bool:
    """Whether the environment's class is importable here and keeps ``TextEnv``'s default ``extract_action``."""
    from agentenvs.core import TextEnv
    from agentenvs.registry import env_class

    try:
        cls = env_class(name)
    except (AgentEnvsError, ImportError, AttributeError):
        return False
    return isinstance(cls, type) and issubclass(cls, TextEnv) and cls.extract_action is TextEnv.extract_action


class EnvPool:
    """Sessions spread over several servers (least-loaded by default, or round-robin), closed together.

    Its clients batch steps (``batch_steps=True`` unless told otherwise): the steps that threads make on
    one server's sessions at the same time go as one batch call, and :meth:`step_many` steps any sessions
    of the pool with one call per server.
    """

    STRATEGIES = ("least_loaded", "round_robin")

    def __init__(
        self, urls: Sequence[str], token: str | None = None, *, strategy: str = "least_loaded", **options: Any
    ):
        if not urls:
            raise InvalidArgument("EnvPool needs at least one server URL")
        if strategy not in self.STRATEGIES:
            raise InvalidArgument(f"strategy must be one of {self.STRATEGIES}, got {strategy!r}")
        options.setdefault("batch_steps", True)
        self.clients = [Client(url, token, **options) for url in urls]
        self.strategy = strategy
        self.envs: list[RemoteEnv] = []
        self._next = itertools.count()
        self._lock = threading.Lock()

    def _order(self) -> list[Client]:
        with self._lock:
            if self.strategy == "round_robin":
                start = next(self._next) % len(self.clients)
                return self.clients[start:] + self.clients[:start]
            load = {id(c): 0 for c in self.clients}
            for env in self.envs:
                if not env._closed:
                    load[id(env.client)] += 1
            return sorted(self.clients, key=lambda c: load[id(c)])

    def make(self, name: str, **kwargs: Any) -> RemoteEnv:
        """A session on the chosen server; a server at capacity or unreachable passes to the next one."""
        last: AgentEnvsError | None = None
        for client in self._order():
            try:
                env = client.make(name, **kwargs)
            except (AtCapacity, ServerUnreachable, protocol.ShuttingDown) as exc:
                last = exc
                continue
            with self._lock:
                self.envs.append(env)
            return env
        assert last is not None
        raise last

    def make_many(self, name: str, count: int, **kwargs: Any) -> list[RemoteEnv]:
        return [self.make(name, **kwargs) for _ in range(count)]

    def step_many(self, envs: Sequence[RemoteEnv], actions: Sequence[str]) -> list[Any]:
        """Step sessions of any of the pool's servers: one batch call per server, the servers at once.

        One item per env, in order, as in :meth:`Client.step_many`: the step's tuple, or its exception.
        """
        groups = batch_groups(envs, actions, lambda env: env.client)
        results: list[Any] = [None] * len(envs)

        def step_server(indexes: list[int]) -> None:
            client = envs[indexes[0]].client
            try:
                answers = client.step_many([envs[i] for i in indexes], [actions[i] for i in indexes])
            except AgentEnvsError as exc:  # that server failed as a whole: its items carry the error
                answers = [exc] * len(indexes)
            for index, answer in zip(indexes, answers, strict=True):
                results[index] = answer

        if len(groups) == 1:
            step_server(groups[0])
        else:
            threads = [threading.Thread(target=step_server, args=(group,)) for group in groups]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return results

    def load(self) -> dict[str, int]:
        """Open sessions of this pool per server URL."""
        counts = {c.url: 0 for c in self.clients}
        for env in self.envs:
            if not env._closed:
                counts[env.client.url] += 1
        return counts

    def close(self) -> None:
        """Close every session of the pool and the connections."""
        with self._lock:
            envs, self.envs = self.envs, []
        for env in envs:
            env.close()
        for client in self.clients:
            client.close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return sum(not env._closed for env in self.envs)
