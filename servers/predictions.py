"""POST /v1/predictions/resolve: real outcomes backfill stored forecasts (docs/forecast.md, "Resolution").

Resolving decides rewards, so the route is closed on a server without tokens: anyone who can reach such a
server could otherwise write outcomes. The store is the one the forecast environments write to
(``$AGENTENVS_FORECAST_STORE``), read when the request comes, so workers and the route agree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from agentenvs import protocol
from agentenvs.errors import UnknownPrediction
from agentenvs.servers.auth import Authenticator

STORE_ENV = "AGENTENVS_FORECAST_STORE"


def resolve_predictions(body: dict[str, Any], auth: Authenticator, headers: Mapping[str, str]) -> dict[str, int]:
    """Resolve one prediction (or every pending one of a question); ``{"resolved": n}`` newly resolved."""
    if not auth.required:
        raise protocol.Unauthorized("resolving predictions needs a server started with --token (it decides rewards)")
    auth(headers)
    ident, outcome, by_question = protocol.parse_resolve(body)
    path = os.environ.get(STORE_ENV)
    if not path:
        raise UnknownPrediction(f"this server keeps no prediction store: start it with {STORE_ENV}=path.sqlite")
    from agentenvs.predictions import PredictionStore

    with PredictionStore(path) as store:
        count = store.resolve_question(ident, outcome) if by_question else int(store.resolve(ident, outcome))
    return {"resolved": count}
