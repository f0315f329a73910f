"""``agentenvs serve``: serve environments over HTTP (protocol v1, docs/protocol.md and docs/server.md)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from agentenvs.errors import AgentEnvsError, InvalidArgument

DESCRIPTION = """\
Serve registered environments over HTTP (wire protocol v1). Environment instances run in worker
processes (cheap built-ins such as bandit run in the server process unless --isolate); the HTTP front is
one uvicorn process (uvloop, httptools) that answers steps itself and runs the other routes in flask. Examples:
  agentenvs serve --env bandit
  agentenvs serve --env bandit --env sciworld --workers 4 --port 9000 --token "$AGENTENVS_TOKEN"
  agentenvs serve --env mine=mypackage.envs:MyEnv      (register and serve your own TextEnv class)
Clients: agentenvs.connect("http://127.0.0.1:8765").make("bandit"). Stop with SIGTERM or Ctrl-C.
"""


def _env_spec(value: str) -> tuple[str, str | None]:
    name, sep, entry_point = value.partition("=")
    if not name or (sep and ":" not in entry_point):
        raise argparse.ArgumentTypeError(f"--env takes NAME or NAME=package.module:Class, got {value!r}")
    return name, entry_point or None


def _positive(kind: type) -> object:
    def parse(value: str) -> float | int:
        number = kind(value)
        if number < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
        return number

    return parse


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--env",
        action="append",
        type=_env_spec,
        required=True,
        metavar="NAME[=module:Class]",
        help="an environment to serve (repeat for several); `agentenvs list` names them",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 for all)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes holding the environments (default 2)")
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="hold every environment in worker processes; without it, environments that declare themselves "
        "cheap and safe (bandit) run in the server process, which saves the worker hop on every step",
    )
    parser.add_argument("--worker-threads", type=int, default=16, help="calls one worker runs at once (default 16)")
    parser.add_argument(
        "--threads", type=int, default=32, help="threads for flask routes and worker-held steps (default 32)"
    )
    parser.add_argument("--max-sessions", type=int, default=512, help="session cap; past it POST /v1/sessions is 429")
    parser.add_argument(
        "--lease-ttl",
        type=_positive(float),
        default=600.0,
        help="close sessions idle this many seconds (default 600; 0 turns the reaper off)",
    )
    parser.add_argument(
        "--step-timeout",
        type=_positive(float),
        default=60.0,
        help="time limit of one step/get_state call in seconds; past it the answer is 504 and the session closes",
    )
    parser.add_argument(
        "--setup-timeout",
        type=_positive(float),
        default=300.0,
        help="time limit of creating a session, reset and set_state (engines such as a JVM start slowly)",
    )
    parser.add_argument(
        "--probe-interval",
        type=_positive(float),
        default=1.0,
        help="seconds between heartbeats to each worker; one unanswered for an interval keeps new sessions away "
        "from that worker (default 1)",
    )
    parser.add_argument(
        "--probe-timeout",
        type=_positive(float),
        default=10.0,
        help="a worker that answers no heartbeat for this long is killed and replaced (default 10)",
    )
    parser.add_argument(
        "--token",
        action="append",
        default=None,
        help="accepted bearer token (repeat for several; default $AGENTENVS_TOKEN if set, else no token)",
    )
    parser.add_argument(
        "--retry-after",
        type=int,
        default=2,
        help="seconds a 429 (at capacity) or 503 (shutting down) answer tells clients to wait (Retry-After)",
    )
    parser.add_argument("--max-request-bytes", type=int, default=1 << 20, help="request body limit (default 1 MiB)")
    parser.add_argument(
        "--keepalive-timeout", type=int, default=120, help="idle keep-alive connections close after this"
    )
    parser.add_argument("--connection-limit", type=int, default=4096, help="open connections at most (default 4096)")
    parser.add_argument(
        "--port-file", type=Path, default=None, help="write {port, pid, url} as JSON here once listening"
    )


def run(args: argparse.Namespace) -> int:
    import agentenvs
    from agentenvs.servers.pool import Probing
    from agentenvs.servers.serve import HTTPConfig, serve
    from agentenvs.servers.sessions import ServerConfig

    envs: dict[str, str | None] = {}
    for name, entry_point in args.env:
        envs[name] = entry_point
    tokens = tuple(args.token or ([os.environ["AGENTENVS_TOKEN"]] if os.environ.get("AGENTENVS_TOKEN") else []))
    try:
        if any(not t.strip() or not t.isascii() for t in tokens):
            raise InvalidArgument("a --token must be non-empty printable ASCII")
        for name, entry_point in envs.items():
            if entry_point is None:
                agentenvs.spec(name)
        config = ServerConfig(
            envs=envs,
            workers=args.workers,
            worker_threads=args.worker_threads,
            max_sessions=args.max_sessions,
            lease_ttl_s=args.lease_ttl,
            step_timeout_s=args.step_timeout,
            setup_timeout_s=args.setup_timeout,
            retry_after_s=args.retry_after,
            tokens=tokens,
            isolate=args.isolate,
            probing=Probing(args.probe_interval, args.probe_timeout),
        )
        http = HTTPConfig(
            host=args.host,
            port=args.port,
            threads=args.threads,
            connection_limit=args.connection_limit,
            keepalive_timeout_s=args.keepalive_timeout,
            max_request_bytes=args.max_request_bytes,
            port_file=args.port_file,
        )
        return serve(config, http)
    except AgentEnvsError as exc:
        print(f"agentenvs serve: {exc}")
        return 2
