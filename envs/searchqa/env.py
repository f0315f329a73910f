"""``SearchQAEnv``: Search-R1's multi-turn question answering over a local retriever.

The agent writes ``<search>query</search>`` and gets the top-k passages (3, as the protocol) inside
``<information>``, or ``<answer>...</answer>``, which ends the episode with Search-R1's exact match as
the reward. ``max_searches`` (default 4) bounds the searches; the turn limit is one more, for the answer.
The retriever is in process by default (Lucene BM25 over the frozen corpus), or an index folder
(``index_dir``), or a server (``retriever_url``, with a bounded ``timeout_s``). The retrieved text is
environment-generated: it is the observation, which rollout records keep out of the loss.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import numpy as np

from agentenvs.actions import ExtractedAction
from agentenvs.core import TextEnv, Transition
from agentenvs.envs.searchqa import SPEC
from agentenvs.envs.searchqa.answers import em_check, f1_score
from agentenvs.envs.searchqa.data import index_for, user_questions
from agentenvs.envs.searchqa.expert import next_action, no_search_guess
from agentenvs.envs.searchqa.protocol import INSTRUCTIONS, INVALID, first_tag, information, parse
from agentenvs.errors import InvalidArgument
from agentenvs.info import text_hash
from agentenvs.retrieval.corpus import check_topk, format_passages

NO_SEARCHES_LEFT = "No searches left: give the final answer between <answer> and </answer>."
_RETRIEVERS: dict[tuple[str, int], Any] = {}
_RETRIEVERS_LOCK = threading.Lock()


def local_retriever(index_dir: str, threads: int = 2):
    """One opened index per folder per process, shared by every environment on it."""
    from agentenvs.retrieval.index import open_index

    with _RETRIEVERS_LOCK:
        key = (index_dir, threads)
        if key not in _RETRIEVERS:
            _RETRIEVERS[key] = open_index(index_dir, threads=threads)
        return _RETRIEVERS[key]


class SearchQAEnv(TextEnv):
    """Search-QA: reward = exact match of the answer; ``metrics`` hold F1 and whether the support was retrieved."""

    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    default_split: ClassVar[str] = "test"
    max_action_chars: ClassVar[int] = 2000
    action_format: ClassVar[str] = "<search>query</search> or <answer>answer</answer>"
    instructions: ClassVar[str] = INSTRUCTIONS
    has_privileged: ClassVar[bool] = True

    def __init__(
        self,
        *,
        topk: int = 3,
        max_searches: int = 4,
        retriever_url: str | None = None,
        index_dir: str | None = None,
        corpus: str | None = None,
        questions: str | None = None,
        timeout_s: float = 10.0,
        token: str | None = None,
        max_turns: int | None = None,
        privileged: bool = False,
        render_mode: str | None = None,
    ):
        check_topk(topk)
        if isinstance(max_searches, bool) or not isinstance(max_searches, int) or max_searches < 0:
            raise InvalidArgument(f"max_searches must be a non-negative integer, got {max_searches!r}")
        super().__init__(
            max_turns=max_turns if max_turns is not None else max_searches + 1,
            privileged=privileged,
            render_mode=render_mode,
        )
        self.topk, self.max_searches, self.timeout_s = topk, max_searches, timeout_s
        self.retriever_url, self.index_dir, self.corpus, self.questions = retriever_url, index_dir, corpus, questions
        self._token = token
        self._retriever: Any = None
        if questions is not None:
            self.default_split = "user"
        self._searched: list[list[str]] = []
        self._seen: set[str] = set()
        self._searches = self._valid_searches = self._invalid = 0

    def tasks(self, split: str) -> tuple[dict[str, Any], ...]:
        if self.questions is None:
            return super().tasks(split)
        if split != "user":
            raise InvalidArgument(f"with questions={self.questions!r} the one split is 'user', not {split!r}")
        return user_questions(self.questions)

    def splits(self) -> dict[str, int]:
        return super().splits() if self.questions is None else {"user": len(self.tasks("user"))}

    def retriever(self):
        if self._retriever is None:
            if self.retriever_url:
                from agentenvs.retrieval.remote import RemoteRetriever

                self._retriever = RemoteRetriever(self.retriever_url, timeout_s=self.timeout_s, token=self._token)
            else:
                self._retriever = local_retriever(self.index_dir or str(index_for(self.corpus)))
        return self._retriever

    def extract_action(self, response: str) -> ExtractedAction | None:
        return first_tag(response)

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        self.retriever()
        self._searched, self._seen = [], set()
        self._searches = self._valid_searches = self._invalid = 0
        return f"Question: {task['question']}\n", self._info(None, [])

    def _step(self, action: str) -> Transition:
        kind, content = parse(action)
        if kind == "answer":
            task = self._task
            em, f1 = em_check(content, task["golden_answers"]), f1_score(content, task["golden_answers"])
            info = self._info(True, [], em=em, f1=f1)
            info["success"] = em == 1.0
            return Transition(f"Final answer: {content}\n", em, terminated=True, info=info)
        if kind == "search":
            self._searches += 1
            if self._searches > self.max_searches or not content:
                text = NO_SEARCHES_LEFT if content else "The query is empty: put words between <search> and </search>."
                return Transition(information(text), 0.0, info=self._info(False, []))
            hits = self.retriever().retrieve([content], self.topk)[0]
            self._valid_searches += 1
            self._searched.append([hit["contents"] for hit in hits])
            self._seen.update(hit["id"] for hit in hits)
            return Transition(information(format_passages(self._searched[-1])), 0.0, info=self._info(True, hits))
        self._invalid += 1
        return Transition(INVALID, 0.0, info=self._info(False, []))

    def _info(self, valid: bool | None, hits: list[dict[str, Any]], **scores: float) -> dict[str, Any]:
        task = self._task
        support = task.get("supporting_ids") or []
        found = sum(1 for doc in support if doc in self._seen)
        metrics = {
            "search_count": float(self._searches), "valid_search_count": float(self._valid_searches),
            "invalid_actions": float(self._invalid),
            **({"retrieval_hit": float(found == len(support)), "support_recall": found / len(support)}
               if support else {}),
            **scores,
        }  # fmt: skip
        info: dict[str, Any] = {
            "search_count": self._searches,
            "valid_search_count": self._valid_searches,
            "retrieved_ids": [hit["id"] for hit in hits],
            "anchor": text_hash(f"{task['task_id']}\n{'|'.join(sorted(self._seen))}\n{self._searches}"),
            "score": scores.get("em", 0.0),
            "metrics": metrics,
        }
        if valid is not None:
            info["action_valid"] = valid
        if self.privileged:
            info["privileged"] = {
                "golden_answers": task["golden_answers"],
                "supporting_ids": support,
                "sub_queries": task.get("sub_queries") or [],
                "expert_action": next_action(task, self._searched),
                "baseline_actions": {"no-search": f"<answer>{no_search_guess(task)}</answer>"},
            }
        return info

    def anchor_paths(self) -> tuple[list[str], list[str]] | None:
        """Two searches that retrieve different passages, in either order: the state is what was
        retrieved and how many searches are spent, not their order (for the conformance suite's
        anchor check); None with fewer than two searches or turns left, or no two such queries."""
        if self.max_searches - self._searches < 2 or self.max_turns - self.turn < 3:
            return None
        question = self._task["question"]
        words = question.rstrip("?").split()
        retrieved = self._retrieved_ids(question)
        for query in (" ".join(words[: len(words) // 2]), " ".join(words[len(words) // 2 :])):
            if query and self._retrieved_ids(query) != retrieved:
                first, second = f"<search>{question}</search>", f"<search>{query}</search>"
                return [first, second], [second, first]
        return None

    def _retrieved_ids(self, query: str) -> set[str]:
        return {hit["id"] for hit in self.retriever().retrieve([query], self.topk)[0]}

    def close(self) -> None:
        if self._retriever is not None and hasattr(self._retriever, "close"):  # a remote one's connections
            self._retriever.close()
        self._retriever = None
        super().close()

    def _describe(self) -> dict[str, Any]:
        source = self.retriever_url or self.index_dir or (self.corpus or "tasks/searchqa/corpus.jsonl.gz (BM25)")
        return {"retriever": source, "topk": self.topk, "max_searches": self.max_searches}
