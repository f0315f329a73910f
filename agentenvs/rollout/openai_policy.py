"""``OpenAIPolicy``: any OpenAI-compatible server (vLLM first), with the exact sampled token ids.

Two modes:

- ``completions`` (the default when a tokenizer is known): the prompt goes out as token ids that this
  side templated (``ChatTokens``), and the answer's ids come back through vLLM's
  ``return_token_ids`` / ``return_tokens_as_token_ids``. The context grows token by token, so what a
  trainer sees is what was sampled (no re-tokenization).
- ``chat``: messages go out; the server templates them. Token ids are recorded when the server returns
  both the prompt's and the answer's (vLLM does), otherwise the episode's ``tokens`` is null.

``logprob_kind`` says what the server's logprobs are of (``raw`` by vLLM's default; ``processed``, after
temperature, with ``--logprobs-mode processed_logprobs``); a trainer sampling at a temperature other than 1
needs ``processed`` ones to compare with its own. A logprob the server leaves out is recorded as None.

Requests have a timeout (cut to the episode's remaining time) and are retried with backoff on
connection errors, 429 and 5xx; a 4xx answer is the policy's problem and is not retried.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.llm import Generation, InfraError, LLMPolicy, PolicyError, Sampling
from agentenvs.rollout.prompting import HistoryConfig
from agentenvs.rollout.tokens import ChatTokens

MODES = ("completions", "chat")
LOGPROB_KINDS = ("raw", "processed")
TOKEN_ID_PREFIX = "token_id:"


class OpenAIPolicy(LLMPolicy):
    """A model behind ``/v1/completions`` or ``/v1/chat/completions``."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        mode: str | None = None,
        tokenizer: Any = None,
        sampling: Sampling | None = None,
        history: HistoryConfig | None = None,
        seed: int = 0,
        timeout_s: float = 120.0,
        retries: int = 3,
        api_key: str | None = None,
        logprob_kind: str = "raw",
    ):
        import requests

        super().__init__(sampling or Sampling(), history or HistoryConfig(), seed)
        self.requests = requests
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._local = threading.local()
        self._sessions: list[Any] = []
        self._sessions_lock = threading.Lock()
        self.model_name = model or self._first_model()
        tokenizer = self._load_tokenizer(tokenizer)
        self.chat = ChatTokens(tokenizer) if tokenizer is not None else None
        mode = mode or ("completions" if self.chat is not None else "chat")
        if mode not in MODES:
            raise InvalidArgument(f"mode must be one of {MODES}, got {mode!r}")
        if mode == "completions" and self.chat is None:
            raise InvalidArgument(
                "completions mode sends token ids, so it needs the model's tokenizer: pass tokenizer=PATH "
                "(a checkpoint folder), or use mode='chat'"
            )
        self.mode = mode
        self.tokens_in = mode == "completions"
        if logprob_kind not in LOGPROB_KINDS:
            raise InvalidArgument(
                f"logprob_kind must be one of {LOGPROB_KINDS} (what the server's logprobs are of: vLLM's default "
                f"is raw, processed with --logprobs-mode processed_logprobs), got {logprob_kind!r}"
            )
        self.logprob_kind = logprob_kind

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url, "mode": self.mode}

    def identity(self) -> dict[str, Any]:
        """The served model's name and the API mode; not the URL (a server may move ports). The
        server's weights behind the name are its own: serve a new checkpoint under a new name."""
        return {**LLMPolicy.describe(self), "mode": self.mode}

    # ------------------------------------------------------------------ set-up

    def _first_model(self) -> str:
        models = self._request("GET", "/models", None, self.timeout_s).get("data") or []
        if not models:
            raise InfraError(f"{self.base_url}/models lists no model; name one: openai:URL:MODEL")
        return str(models[0]["id"])

    def _load_tokenizer(self, tokenizer: Any) -> Any:
        """A tokenizer object, a checkpoint path, "smollm2", or None (guessed from the model name)."""
        if tokenizer is None and "smollm2" in self.model_name.lower():
            tokenizer = "smollm2"
        if tokenizer is None or not isinstance(tokenizer, str):
            return tokenizer
        from transformers import AutoTokenizer

        if tokenizer == "smollm2":
            from agentenvs.rollout.smollm2 import smollm2_checkpoint

            tokenizer = str(smollm2_checkpoint())
        return AutoTokenizer.from_pretrained(tokenizer)

    # ------------------------------------------------------------------ requests

    def _session(self) -> Any:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = self.requests.Session()
            with self._sessions_lock:
                self._sessions.append(session)
        return session

    def close(self) -> None:
        """Close the keep-alive connections of every thread that used the policy."""
        with self._sessions_lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()

    def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout_s: float | None) -> dict[str, Any]:
        """One call with retries; raises TimeoutError when the episode's time ran out."""
        timeout = self.timeout_s if timeout_s is None else min(self.timeout_s, timeout_s)
        episode_bound = timeout_s is not None and timeout_s < self.timeout_s
        url = self.base_url + path
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(8.0, 0.5 * 2 ** (attempt - 1)))
            try:
                answer = self._session().request(method, url, json=body, headers=self.headers, timeout=timeout)
            except self.requests.Timeout as exc:
                if episode_bound:
                    raise TimeoutError(f"{url} did not answer within the episode's remaining {timeout:.1f} s") from exc
                problem = f"no answer within {timeout:g} s"
                continue
            except self.requests.ConnectionError as exc:
                problem = f"cannot connect ({exc.__class__.__name__})"
                continue
            if answer.status_code == 429 or answer.status_code >= 500:
                problem = f"HTTP {answer.status_code}: {answer.text[:300]}"
                continue
            if answer.status_code >= 400:
                raise PolicyError(f"{url} refused the request: HTTP {answer.status_code}: {answer.text[:500]}")
            try:
                return answer.json()
            except ValueError as exc:
                raise PolicyError(f"{url} answered with something that is not JSON: {answer.text[:200]}") from exc
        raise InfraError(
            f"{url} failed {self.retries + 1} times ({problem}); is the server running? (for vLLM see docs/rollout.md)"
        )

    def _body(self, seed: int, n: int) -> dict[str, Any]:
        settings = self.sampling_settings
        body: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "seed": seed,
            "n": n,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
        }
        if settings.top_k:
            body["top_k"] = settings.top_k
        if settings.stop:
            body["stop"] = list(settings.stop)
        return body

    # ------------------------------------------------------------------ generation

    def sample(self, prompt_ids: list[int], n: int, seed: int, timeout_s: float | None = None) -> list[Generation]:
        """``n`` completions of one token-id prompt (``/v1/completions``)."""
        body = self._body(seed, n) | {"prompt": list(prompt_ids), "logprobs": 1}
        answer = self._request("POST", "/completions", body, timeout_s)
        return [self._completion_choice(choice, prompt_ids) for choice in answer.get("choices", [])]

    def sample_chat(
        self, messages: list[dict[str, str]], n: int, seed: int, timeout_s: float | None = None
    ) -> list[Generation]:
        """``n`` completions of a conversation (``/v1/chat/completions``)."""
        body = self._body(seed, n) | {"messages": messages, "logprobs": True, "top_logprobs": 1}
        answer = self._request("POST", "/chat/completions", body, timeout_s)
        prompt_ids = answer.get("prompt_token_ids")
        return [self._chat_choice(choice, prompt_ids) for choice in answer.get("choices", [])]

    def generate_ids(self, prompt_ids: list[int], seed: int, timeout_s: float | None) -> Generation:
        return self._one(self.sample(prompt_ids, 1, seed, timeout_s))

    def generate_chat(self, messages: list[dict[str, str]], seed: int, timeout_s: float | None) -> Generation:
        return self._one(self.sample_chat(messages, 1, seed, timeout_s))

    def _one(self, generations: list[Generation]) -> Generation:
        if not generations:
            raise PolicyError(f"{self.base_url} answered with no choices")
        return generations[0]

    def _completion_choice(self, choice: dict[str, Any], prompt_ids: list[int]) -> Generation:
        logprobs = choice.get("logprobs") or {}
        ids = choice.get("token_ids") or _ids_from_tokens(logprobs.get("tokens"))
        if ids is None:
            raise PolicyError(
                f"{self.base_url} returned no token ids (vLLM's return_token_ids); token-in/token-out needs a vLLM "
                "server or agentenvs' own (python -m agentenvs.rollout.openai_server); otherwise use mode='chat'"
            )
        values = logprobs.get("token_logprobs")
        return Generation(
            text=choice.get("text", ""),
            token_ids=[int(i) for i in ids],
            logprobs=_known(values, len(ids)),
            prompt_ids=list(prompt_ids),
            finish_reason=choice.get("finish_reason"),
        )

    def _chat_choice(self, choice: dict[str, Any], prompt_ids: list[int] | None) -> Generation:
        content = (choice.get("logprobs") or {}).get("content") or []
        ids = choice.get("token_ids") or _ids_from_tokens([c.get("token") for c in content])
        return Generation(
            text=(choice.get("message") or {}).get("content") or "",
            token_ids=[int(i) for i in ids] if ids else None,
            logprobs=_known([c.get("logprob") for c in content], len(ids or [])),
            prompt_ids=[int(i) for i in prompt_ids] if prompt_ids else None,
            finish_reason=choice.get("finish_reason"),
        )


def _known(values: list[Any] | None, count: int) -> list[float] | None:
    """One float logprob per id, or None when the server gave none, too few, or a null among them."""
    if not values or len(values) != count or any(v is None for v in values):
        return None
    return [float(v) for v in values]


def _ids_from_tokens(tokens: list[Any] | None) -> list[int] | None:
    """Ids from vLLM's ``return_tokens_as_token_ids`` strings (``token_id:123``); None if they are not that."""
    if not tokens or not all(isinstance(t, str) and t.startswith(TOKEN_ID_PREFIX) for t in tokens):
        return None
    return [int(t[len(TOKEN_ID_PREFIX) :]) for t in tokens]
