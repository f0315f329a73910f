"""ShellOps costs: sandbox start, per-command overhead against plain subprocesses, episodes/s at 16
concurrent sessions on a server, and builder throughput. Writes ``bench/results/shellops.json``.

Run as ``python bench/bench_shellops.py`` (root, bubblewrap installed).
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from common import play_concurrently, summarize, timed, write_result  # bench/common.py

import agentenvs
from agentenvs.envs.shellops.sandbox import Shell, run_once
from agentenvs.envs.shellops.workspace import Workspace
from agentenvs.servers.launch import launch_server
from agentenvs.tasks.shellops import build, sources


def start_and_close() -> None:
    workspace = Workspace(64, 8192)
    Shell(workspace).close()
    workspace.close()


def per_command(repeats: int) -> dict:
    """``true`` through each path, ``repeats`` times."""
    plain = [timed(subprocess.run, ["true"])[1] for _ in range(repeats)]
    bash = [timed(subprocess.run, ["bash", "-c", "true"])[1] for _ in range(repeats)]
    workspace = Workspace(64, 8192)
    shell = Shell(workspace)
    try:
        persistent = [timed(shell.run, "true")[1] for _ in range(repeats)]
        fresh = [timed(run_once, workspace, "true")[1] for _ in range(repeats)]
    finally:
        shell.close()
        workspace.close()
    return {
        "plain_subprocess_true": summarize(plain),
        "plain_subprocess_bash_c_true": summarize(bash),
        "sandbox_persistent_shell_true": summarize(persistent),
        "sandbox_fresh_bwrap_true": summarize(fresh),
    }


def concurrent_episodes(sessions: int, episodes: int) -> dict:
    """Every session plays the expert plans of the demo tasks, round robin, over HTTP."""
    env = agentenvs.make("shellops")
    tasks = env.tasks("demo")
    env.close()

    def pick(session: int, episode: int):
        task = tasks[(session + episode) % len(tasks)]
        return {"task_id": task["task_id"], "split": "demo"}, task["task_id"], task["reference"]

    with launch_server(["shellops"], workers=2, extra_args=["--max-sessions", str(sessions * 2)]) as server:
        result = play_concurrently(server.url, "shellops", sessions, episodes, pick)
    result["episodes_per_s"] = sessions * episodes / result["wall_s"]
    return result


def builder_throughput(requirement: str, n: int) -> dict:
    files = sources.from_sdist(sources.fetch_sdist(requirement))
    (rows, _, rejected), seconds = timed(build.build, files, requirement.replace("==", "-"), n)
    return {"source": requirement, "kept": len(rows), "rejected": len(rejected), "seconds": seconds,
            "tasks_per_minute": 60 * len(rows) / seconds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    start_and_close()  # the probe and the first imports are not part of a start
    starts = [timed(start_and_close)[1] for _ in range(30)]
    result = {
        "sandbox_start_and_close": summarize(starts),
        "per_command": per_command(args.repeats),
        "concurrent": concurrent_episodes(args.sessions, args.episodes),
        "builder": builder_throughput("toolz==0.12.1", 30),
    }
    print(write_result("shellops", result, *([args.results] if args.results else [])))


if __name__ == "__main__":
    main()
