"""WebShop costs: step, search and reset latency on the default 10k catalogue, catalogue generation,
index build time and memory at 10k and 100k products, the reward's speed beside thefuzz's fuzzy
score, and episodes/s of the expert through a server at 64 sessions. Writes ``bench/results/webshop.json``.

Run as ``python bench/bench_webshop.py [--sizes 10000 100000] [--sessions 64]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import psutil
from common import RESULTS, play_concurrently, summarize, timed, write_result  # bench/common.py

import agentenvs
from agentenvs.envs.webshop import catalogue, goals
from agentenvs.envs.webshop.env import search_engine
from agentenvs.envs.webshop.products import from_records
from agentenvs.envs.webshop.reward import fuzzy_score, get_reward
from agentenvs.envs.webshop.search import ProductSearch
from agentenvs.servers.launch import launch_server


def latency(episodes: int) -> dict:
    """Reset and step of the expert's episodes on the test panel, and BM25 searches alone."""
    env = agentenvs.make("webshop", privileged=True)
    timed(env.reset, seed=0, options={"split": "test"})  # builds the catalogue and the index once
    resets, steps, searches = [], [], []
    for task in env.tasks("test")[:episodes]:
        (_, info), took = timed(env.reset, seed=0, options={"split": "test", "task_id": task["task_id"]})
        resets.append(took)
        while not env.done:
            action = info["privileged"]["expert_action"]
            (_, _, _, _, info), took = timed(env.step, action)
            (searches if action.startswith("search[") else steps).append(took)
    engine = search_engine(None, None)  # the process's engine the environment played on
    rng = np.random.default_rng(0)
    bm25 = [timed(engine.search, task["goal"]["query"].split(" "), rng)[1] for task in env.tasks("test")[:episodes]]
    env.close()
    return {"reset": summarize(resets), "click_step": summarize(steps), "search_step": summarize(searches),
            "bm25_search": summarize(bm25)}  # fmt: skip


def index_cost(size: int) -> dict:
    """Generate a catalogue of ``size`` products, load it and build its Lucene index in a fresh cache."""
    process = psutil.Process()
    before = process.memory_info().rss
    records, generate_s = timed(catalogue.generate, size, 11)
    loaded, load_s = timed(from_records, records["products"], records["attributes"], records["reviews"], "bench")
    rss_catalogue = process.memory_info().rss - before
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        engine, build_s = timed(ProductSearch, loaded)
        index_mb = sum(f.stat().st_size for f in Path(engine.index_dir).rglob("*") if f.is_file()) / 1e6
        rng = np.random.default_rng(0)
        queries = [p["query"] for p in loaded.products[:200]]
        search = summarize([timed(engine.search, q.split(" "), rng)[1] for q in queries])
    return {"products": size, "generate_s": generate_s, "load_s": load_s, "index_build_s": build_s,
            "index_mb": index_mb, "catalogue_rss_mb": rss_catalogue / 1e6, "bm25_search": search}  # fmt: skip


def reward_speed(n: int) -> dict:
    """``get_reward`` per purchase, and our fuzzy score against thefuzz's on the same pairs."""
    from thefuzz import fuzz

    records = catalogue.generate(500, 3)
    loaded = from_records(records["products"], records["attributes"], records["reviews"], "bench")
    made = goals.synthetic_goals(loaded, 0)[:n]
    prices = loaded.prices
    rewards = [timed(get_reward, loaded.by_asin[g["asin"]], g, price=prices[g["asin"]], options=g["goal_options"])[1]
               for g in made]  # fmt: skip
    pairs = [(a, b) for g in made for a in g["attributes"] for b in loaded.by_asin[g["asin"]]["Attributes"]][:n]
    ours = [timed(fuzzy_score, a, b)[1] for a, b in pairs]
    theirs = [timed(fuzz.token_set_ratio, a, b)[1] for a, b in pairs]
    result = {"get_reward": summarize(rewards), "fuzzy_ours": summarize(ours), "fuzzy_thefuzz": summarize(theirs)}
    result["fuzzy_ratio_thefuzz_over_ours"] = result["fuzzy_thefuzz"]["median_ms"] / result["fuzzy_ours"]["median_ms"]
    return result


def served(sessions: int, episodes: int) -> dict:
    """The expert's plans for test goals, played by ``sessions`` concurrent remote sessions."""
    env = agentenvs.make("webshop", privileged=True)
    plans = []
    for task in env.tasks("test")[: sessions * episodes]:
        _, info = env.reset(seed=0, options={"split": "test", "task_id": task["task_id"]})
        plans.append((task["task_id"], list(info["privileged"]["expert_plan"])))
    env.close()

    def pick(session: int, episode: int):
        task_id, plan = plans[(session * episodes + episode) % len(plans)]
        return {"task_id": task_id, "split": "test"}, task_id, plan

    with launch_server(["webshop"], workers=2, extra_args=["--max-sessions", str(sessions * 2)]) as server:
        cold = play_concurrently(server.url, "webshop", sessions, 1, pick)  # each worker loads catalogue and index
        result = play_concurrently(server.url, "webshop", sessions, episodes, pick)
    result["episodes_per_s"] = sessions * episodes / result["wall_s"]
    result["first_round_with_worker_start"] = {"wall_s": cold["wall_s"], "step": cold["step"], "errors": cold["errors"]}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument("--only-served", action="store_true", help="rerun only the served part into the results")
    args = parser.parse_args()
    if args.only_served:
        path = (args.results or RESULTS) / "webshop.json"
        result = json.loads(path.read_text())
        result["served"] = served(args.sessions, 2)
        for key in ("benchmark", "date", "machine"):
            result.pop(key)
        print(write_result("webshop", result, *([args.results] if args.results else [])))
        return
    result = {
        "latency_10k": latency(args.episodes),
        "reward": reward_speed(2000),
        "served": served(args.sessions, 2),
        "index": [index_cost(size) for size in args.sizes],
    }
    print(write_result("webshop", result, *([args.results] if args.results else [])))


if __name__ == "__main__":
    main()
