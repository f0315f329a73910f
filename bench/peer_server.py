"""The peers' environment server design, for ``bench_server_peer.py``: FastAPI + uvicorn, environments held
in the server process (as AgentGym's TextCraft server does), wrapping the same ``agentenvs`` environment.

Run as ``python bench/peer_server.py --env bandit --port N``. It needs ``fastapi`` and ``uvicorn``, which
only the bench environment installs (``make bench``); uvicorn's defaults pick uvloop and httptools when
present, so the peer runs its fastest.
"""

from __future__ import annotations

import argparse
import itertools
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

import agentenvs


class ResetBody(BaseModel):
    id: int
    seed: int | None = None


class StepBody(BaseModel):
    id: int
    action: str


class CloseBody(BaseModel):
    id: int


def build_app(env_name: str) -> FastAPI:
    """One dict of live environments, one lock, plain synchronous handlers (FastAPI runs them in its pool)."""
    app = FastAPI()
    envs: dict[int, Any] = {}
    ids = itertools.count()
    lock = threading.Lock()

    def env_of(env_id: int) -> Any:
        with lock:
            env = envs.get(env_id)
        if env is None:
            raise HTTPException(404, f"no env {env_id}")
        return env

    @app.post("/create")
    def create() -> dict[str, int]:
        env = agentenvs.make(env_name)
        with lock:
            env_id = next(ids)
            envs[env_id] = env
        return {"id": env_id}

    @app.post("/reset")
    def reset(body: ResetBody) -> dict[str, Any]:
        observation, _ = env_of(body.id).reset(seed=body.seed)
        return {"observation": observation}

    @app.post("/step")
    def step(body: StepBody) -> dict[str, Any]:
        observation, reward, terminated, truncated, _ = env_of(body.id).step(body.action)
        return {"observation": observation, "reward": reward, "done": terminated or truncated}

    @app.post("/close")
    def close(body: CloseBody) -> dict[str, bool]:
        with lock:
            env = envs.pop(body.id, None)
        if env is not None:
            env.close()
        return {"closed": env is not None}

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", default="bandit")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(build_app(args.env), host="127.0.0.1", port=args.port, log_level="warning", backlog=4096)


if __name__ == "__main__":
    main()
