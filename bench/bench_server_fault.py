"""Kill one worker process (SIGKILL) in the middle of a run: only its sessions may fail, all others finish.

32 ``RemoteEnv`` sessions on 2 workers (``--isolate``, so bandit lives in them) play bandit episodes in threads;
one worker is killed a second in.
Reported: how many sessions were pinned to it, which failed and how, whether every other session
finished, how long the replacement worker took, and that a new session works afterwards.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time

from common import write_result  # bench/common.py: scripts run as `python bench/<script>.py`

import agentenvs
from agentenvs.servers.launch import launch_server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with launch_server(["bandit"], workers=2, extra_args=("--isolate",)) as server:  # bandit is inline otherwise
        client = agentenvs.connect(server.url)
        envs = [client.make("bandit") for _ in range(args.sessions)]
        pinned = {env.session_id: client.request("GET", env.path)["worker_pid"] for env in envs}
        victim = sorted(set(pinned.values()))[0]
        outcome: dict[str, str] = {}

        def play(env: agentenvs.RemoteEnv, index: int) -> None:
            try:
                env.reset(seed=index)
                for step in range(args.steps):
                    _, _, terminated, truncated, _ = env.step("pull[0]")
                    if terminated or truncated:
                        env.reset(seed=index + step)
                    time.sleep(0.02)
                outcome[env.session_id] = "finished"
            except agentenvs.errors.EnvFailed as exc:
                outcome[env.session_id] = "env_failed" if "died" in str(exc) else f"env_failed: {exc}"
            except Exception as exc:
                outcome[env.session_id] = f"{type(exc).__name__}: {exc}"

        threads = [threading.Thread(target=play, args=(env, i)) for i, env in enumerate(envs)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.perf_counter()
        replaced_s = None
        while time.perf_counter() - killed_at < 30:
            if client.health()["workers_alive"] == 2:
                replaced_s = time.perf_counter() - killed_at
                break
            time.sleep(0.01)
        for thread in threads:
            thread.join()
        on_victim = [sid for sid, pid in pinned.items() if pid == victim]
        others = [sid for sid in pinned if sid not in on_victim]
        fresh = client.make("bandit")
        fresh.reset(seed=0)
        fresh.step("pull[0]")
        result = {
            "command": f"python bench/bench_server_fault.py --sessions {args.sessions} --steps {args.steps}",
            "sessions": args.sessions,
            "sessions_on_killed_worker": len(on_victim),
            "killed_worker_sessions_failed_with_env_failed": sum(outcome.get(s) == "env_failed" for s in on_victim),
            "other_sessions_finished": sum(outcome.get(s) == "finished" for s in others),
            "other_sessions": len(others),
            "unexpected_outcomes": {s: o for s, o in outcome.items() if o not in ("finished", "env_failed")},
            "only_its_sessions_failed": all(outcome.get(s) == "finished" for s in others)
            and all(outcome.get(s) == "env_failed" for s in on_victim),
            "worker_replaced_after_s": replaced_s,
            "new_session_after_fault_works": True,
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        }
        write_result("server_fault", result)
    return 0 if result["only_its_sessions_failed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
