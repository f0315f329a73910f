"""A WSGI entry point for running the app under another WSGI server, configured by environment.

``agentenvs serve`` (uvicorn with ``servers/front.py``, which answers the step route itself) is the
supported way. This exists so the choice can be measured against waitress and so a site that standardises
on a WSGI server can still use it (every route, the step included, then runs in flask), with exactly one
process (sessions live in that process; several processes would each hold different sessions and answer 404
for the others)::

    AGENTENVS_SERVE='{"envs": {"bandit": null}}' waitress-serve --threads 32 --asyncore-use-poll \\
        --call agentenvs.servers.wsgi:app_from_environment
"""

from __future__ import annotations

import atexit
import json
import os
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.servers.app import DEFAULT_MAX_REQUEST_BYTES, create_app
from agentenvs.servers.sessions import ServerConfig, SessionManager


def app_from_environment() -> Any:
    """The flask app for the ``ServerConfig`` fields in ``$AGENTENVS_SERVE`` (JSON), with its workers started."""
    raw = os.environ.get("AGENTENVS_SERVE")
    if not raw:
        raise InvalidArgument('set AGENTENVS_SERVE to a JSON object such as {"envs": {"bandit": null}}')
    fields = json.loads(raw)
    max_request_bytes = int(fields.pop("max_request_bytes", DEFAULT_MAX_REQUEST_BYTES))
    fields["tokens"] = tuple(fields.get("tokens", ()))
    manager = SessionManager(ServerConfig(**fields))
    manager.start()
    atexit.register(manager.shutdown)
    return create_app(manager, tokens=manager.config.tokens, max_request_bytes=max_request_bytes)
