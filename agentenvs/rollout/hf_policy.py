"""``TransformersPolicy``: a local checkpoint on CPU or GPU, sampling in batches, token ids in and out.

Episodes call the policy from many driver threads; a batcher thread gathers their prompts (up to
``batch_size``, waiting at most ``batch_wait_s`` for company) and runs one batched decode with a KV
cache. Each row samples from its own seeded generator, so a turn's sample depends on its seed, not on
which other episodes shared the batch (up to float rounding of padded batches). The recorded logprob
of each sampled id is of the distribution it was drawn from: the log-softmax of the logits divided by
the temperature (``logprob_kind`` "processed"; at temperature 1 the same as vLLM's default "raw"; at
temperature 0, greedy, the raw logits').
"""

from __future__ import annotations

import hashlib
import queue
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument
from agentenvs.rollout.llm import Generation, LLMPolicy, PolicyError, Sampling
from agentenvs.rollout.prompting import HistoryConfig
from agentenvs.rollout.tokens import ChatTokens


def checkpoint_fingerprint(path: Path) -> str:
    """A SHA-256 over the names, sizes and modification times of a checkpoint folder's files: cheap
    for large weights, and changed whenever a file is written again."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class TransformersPolicy(LLMPolicy):
    """A causal LM from a checkpoint folder (``hf:PATH``) or an already loaded model and tokenizer."""

    name = "transformers"
    logprob_kind = "processed"

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any = None,
        *,
        device: str | None = None,
        dtype: str = "float32",
        sampling: Sampling | None = None,
        history: HistoryConfig | None = None,
        seed: int = 0,
        batch_size: int = 8,
        batch_wait_s: float = 0.02,
        max_context: int | None = None,
    ):
        import torch

        super().__init__(sampling or Sampling(), history or HistoryConfig(), seed)
        if isinstance(model, (str, Path)):
            from transformers import AutoModelForCausalLM, AutoTokenizer

            path = Path(model)
            if not (path / "config.json").is_file():
                raise InvalidArgument(f"{path} is not a transformers checkpoint folder (no config.json)")
            self.model_name = str(path)
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(path))
            model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype))
        else:
            self.model_name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
            if tokenizer is None:
                raise InvalidArgument("pass the tokenizer together with an already loaded model")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.chat = ChatTokens(tokenizer, _eos_ids(model))
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.chat.stop_token_ids[0]
        self.max_context = max_context or int(getattr(model.config, "max_position_embeddings", 2048))
        self.batch_size = max(1, int(batch_size))
        self._batcher = _Batcher(self._generate_batch, self.batch_size, batch_wait_s)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "device": self.device, "batch_size": self.batch_size}

    def identity(self) -> dict[str, Any]:
        """The checkpoint's name and a fingerprint of its files, so a regenerated or retrained
        checkpoint at the same path counts as another model."""
        path = Path(self.model_name)
        return {**LLMPolicy.describe(self), "checkpoint": checkpoint_fingerprint(path) if path.is_dir() else None}

    def generate_ids(
        self, prompt_ids: list[int], seed: int, timeout_s: float | None, sampling: Sampling | None = None
    ) -> Generation:
        """One completion of a token-id prompt (``sampling`` overrides the policy's settings)."""
        if len(prompt_ids) >= self.max_context:
            raise PolicyError(
                f"the prompt has {len(prompt_ids)} tokens, at or over the model's context of {self.max_context}; "
                "use a windowed history (--history last:4) or fewer turns (max_turns)"
            )
        return self._batcher.submit((list(prompt_ids), int(seed), sampling or self.sampling_settings), timeout_s)

    def close(self) -> None:
        self._batcher.close()

    def _generate_batch(self, requests: list[tuple[list[int], int, Sampling]]) -> list[Generation]:
        """Decode every request together; each row has its own generator, settings and length budget."""
        import torch
        from transformers import DynamicCache

        width = max(len(p) for p, _, _ in requests)
        budgets = [max(1, min(s.max_tokens, self.max_context - width)) for _, _, s in requests]
        ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, (prompt, _, _) in enumerate(requests):
            ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt) :] = 1
        generators = [torch.Generator().manual_seed(seed) for _, seed, _ in requests]
        temperatures = torch.tensor([[s.temperature if s.temperature > 0 else 1.0] for _, _, s in requests])
        outputs: list[list[int]] = [[] for _ in requests]
        logprobs: list[list[float]] = [[] for _ in requests]
        finish = ["length"] * len(requests)
        done = [False] * len(requests)
        stop_ids = set(self.chat.stop_token_ids)
        with torch.inference_mode():
            cache = DynamicCache(config=self.model.config)
            mask = mask.to(self.device)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            step_input = ids.to(self.device)
            for _ in range(max(budgets)):
                out = self.model(
                    input_ids=step_input, attention_mask=mask, position_ids=positions, cache=cache, logits_to_keep=1
                )
                logits = out.logits[:, -1, :].float().cpu()
                sampled = torch.log_softmax(logits / temperatures, dim=-1)
                for row, (_, _, settings) in enumerate(requests):
                    if done[row]:
                        continue
                    token = _sample_row(logits[row], settings, generators[row])
                    outputs[row].append(token)
                    logprobs[row].append(float(sampled[row, token]))
                    if token in stop_ids or (settings.stop and self._hit_stop_string(outputs[row], settings.stop)):
                        done[row], finish[row] = True, "stop"
                    elif len(outputs[row]) >= budgets[row]:
                        done[row] = True
                if all(done):
                    break
                last = [o[-1] if not d else self.pad_id for o, d in zip(outputs, done, strict=True)]
                step_input = torch.tensor(last, dtype=torch.long).unsqueeze(1).to(self.device)
                mask = torch.cat([mask, torch.ones_like(step_input)], dim=1)
                positions = positions[:, -1:] + 1
        return [
            Generation(text=self.chat.response_text(o), token_ids=o, logprobs=lp, prompt_ids=p, finish_reason=f)
            for o, lp, (p, _, _), f in zip(outputs, logprobs, requests, finish, strict=True)
        ]

    def _hit_stop_string(self, output: list[int], stop: tuple[str, ...]) -> bool:
        text = self.tokenizer.decode(output[-32:], skip_special_tokens=False)
        return any(s in text for s in stop)


def _sample_row(logits: Any, settings: Sampling, generator: Any) -> int:
    """One id from one row of logits: greedy at temperature 0, else top-k / top-p sampling."""
    import torch

    if settings.temperature <= 0:
        return int(logits.argmax())
    scaled = logits / settings.temperature
    if settings.top_k and settings.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, settings.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if settings.top_p < 1.0:
        ordered, order = probs.sort(descending=True)
        ordered = ordered.masked_fill(ordered.cumsum(-1) - ordered > settings.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, ordered)
    return int(torch.multinomial(probs, 1, generator=generator))


def _eos_ids(model: Any) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = getattr(model.config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]


class _Batcher:
    """Collects requests from many threads into batches for one worker thread."""

    def __init__(self, run: Any, max_batch: int, wait_s: float):
        self.run = run
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.requests: queue.Queue[tuple[Any, Future] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="transformers-policy-batcher", daemon=True)
        self.thread.start()

    def submit(self, request: Any, timeout_s: float | None) -> Any:
        future: Future = Future()
        self.requests.put((request, future))
        return future.result(timeout=timeout_s)

    def close(self) -> None:
        if self.thread.is_alive():
            self.requests.put(None)
            self.thread.join(timeout=60)

    def _loop(self) -> None:
        while True:
            first = self.requests.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    item = self.requests.get(timeout=self.wait_s)
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            live = [(r, f) for r, f in batch if f.set_running_or_notify_cancel()]
            if live:
                try:
                    results = self.run([r for r, _ in live])
                except Exception as exc:  # the waiting episodes get the error, the batcher goes on
                    for _, future in live:
                        future.set_exception(exc)
                else:
                    for (_, future), result in zip(live, results, strict=True):
                        future.set_result(result)
            if stop:
                return
