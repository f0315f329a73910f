"""A retriever behind a URL: the client of ``agentenvs serve-retriever`` (or Search-R1's own server).

Every call has a timeout (Search-R1's client has none, so a stuck server hangs its trainer); a server
that is down, slow or answering errors fails the call with a message that says which and what to do.
"""

from __future__ import annotations

from typing import Any

from agentenvs.errors import EnvFailed


class RemoteRetriever:
    backend = "remote"

    def __init__(self, url: str, *, timeout_s: float = 10.0, token: str | None = None):
        import requests

        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def retrieve(self, queries: list[str], k: int) -> list[list[dict[str, Any]]]:
        """``{"id", "contents", "score"}`` of the ``k`` best passages of each query."""
        import requests

        start = "start one with `agentenvs serve-retriever --index DIR --port PORT` or pass another retriever_url"
        try:
            answer = self.session.post(
                f"{self.url}/retrieve",
                json={"queries": queries, "topk": k, "return_scores": True},
                timeout=self.timeout_s,
            )
        except requests.Timeout:
            raise EnvFailed(
                f"the retriever at {self.url} did not answer within {self.timeout_s:g} s; {start}"
            ) from None
        except requests.ConnectionError:
            raise EnvFailed(f"the retriever at {self.url} is not reachable; {start}") from None
        if answer.status_code != 200:
            try:
                message = answer.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = answer.text[:200]
            raise EnvFailed(f"the retriever at {self.url} answered {answer.status_code}: {message}")
        return [
            [
                {"id": item["document"]["id"], "contents": item["document"]["contents"], "score": item["score"]}
                for item in hits
            ]
            for hits in answer.json()["result"]
        ]

    def close(self) -> None:
        self.session.close()
