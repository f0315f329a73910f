"""ShellOps: a task in a sandboxed shell, ``<bash>command</bash>`` to work and ``<submit>answer</submit>`` to end.

Each reset unpacks the task's workspace snapshot into a fresh tmpfs and starts one persistent shell
on it (``sandbox.Shell``). The observation of a command is its exit code and its capped stdout and
stderr. The reward comes at submit: 1.0 when the verifier passes, else 0.0. ``score`` on every step is
the share of the task's checks that pass over the workspace so far (answer tasks: 0 until a correct
submit); the checks read the workspace from the host (``verifier.py``). ``anchor`` hashes the task, the
workspace's files (paths, modes, contents; no times) and the shell's working folder.
``info["parsed_action"]`` is the command's bashlex structure; the expert (privileged ``expert_plan``)
is the task's reference solution, and ``baseline_actions["random"]`` a random command of a fixed menu.
The environment refuses to start when its panels lie where the sandbox can read them.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np

from agentenvs import panels
from agentenvs.actions import ExtractedAction, extract_tagged_action
from agentenvs.core import TextEnv, Transition, ascii_safe
from agentenvs.envs.shellops import SPEC
from agentenvs.envs.shellops.baseline import random_action
from agentenvs.envs.shellops.sandbox import Limits, Result, Shell, require_sandbox, require_unreadable
from agentenvs.envs.shellops.snapshot import read_files, unpack
from agentenvs.envs.shellops.structure import structure
from agentenvs.envs.shellops.tree import Tree, read_tree
from agentenvs.envs.shellops.verifier import answer_matches, check_results
from agentenvs.envs.shellops.workspace import Workspace, sweep_stale
from agentenvs.info import text_hash

ACTION = re.compile(r"<(bash|submit)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
TAGGED = re.compile(r"(<(bash|submit)>.*?</\2>)", re.DOTALL | re.IGNORECASE)
UNLIMITED = 1 << 30


def parse_action(action: str) -> tuple[str, str] | None:
    """``("bash", command)`` or ``("submit", answer)`` from the last tag in the action, else None."""
    matches = list(ACTION.finditer(action))
    if not matches:
        return None
    return matches[-1].group(1).lower(), matches[-1].group(2)


def render(result: Result, limits: Limits) -> str:
    """What the agent sees of a command: the exit code, then stdout and stderr (printable ASCII)."""
    if result.timed_out:
        head = (
            f"timed out after {limits.command_timeout_s:g} s; the shell was restarted "
            "(files kept; cwd and variables reset)"
        )
    elif result.restarted:
        head = f"the shell exited with code {result.exit_code}; a new shell was started in /workspace"
    else:
        head = f"exit code: {result.exit_code}"
    lines = [head]
    for name, data in (("stdout", result.stdout), ("stderr", result.stderr)):
        if data:
            lines.append(f"{name}:\n{ascii_safe(data.decode('utf-8', 'replace'), UNLIMITED).rstrip()}")
    if result.truncated:
        lines.append(f"[output cut at {limits.output_bytes} bytes per stream]")
    return "\n".join(lines)


class ShellOpsEnv(TextEnv):
    """One sandboxed shell per episode over a fresh copy of the task's workspace."""

    name: ClassVar[str] = SPEC.name
    version: ClassVar[str] = SPEC.version
    default_max_turns: ClassVar[int] = SPEC.max_turns
    action_format: ClassVar[str] = "<bash>COMMAND</bash> to run a command, <submit>ANSWER</submit> to finish"
    instructions: ClassVar[str] = (
        "You work in a Linux shell inside a sandbox, in the folder /workspace, with no network. Each turn, answer "
        "with exactly one action: <bash>COMMAND</bash> runs COMMAND in a persistent bash (cd and variables carry "
        "over; each command has a time limit) and shows its exit code and output; <submit>ANSWER</submit> ends "
        "the episode. For a question, ANSWER is the answer (several items: one per line); for a change to the "
        "files, make the change with commands, then submit anything, e.g. <submit>done</submit>. Change only what "
        "the task asks: a file added, removed or changed elsewhere in /workspace fails it (keep scratch files in /tmp)."
    )
    has_privileged: ClassVar[bool] = True

    def __init__(self, *, max_turns: int | None = None, privileged: bool = False, render_mode: str | None = None):
        super().__init__(max_turns=max_turns, privileged=privileged, render_mode=render_mode)
        require_sandbox()
        require_unreadable(panels.panel_dir(self.name))
        sweep_stale()
        self.limits = Limits()
        self._workspace: Workspace | None = None
        self._shell: Shell | None = None
        self._scores: dict[str, float] = {}
        self._solution: tuple[str, dict[bytes, bytes]] = ("", {})
        self._tree = Tree()
        self._metrics: dict[str, int] = {}

    def turn_limit(self, task: dict[str, Any], requested: int | None) -> int:
        return requested or task.get("max_turns") or self.default_max_turns

    def extract_action(self, response: str) -> ExtractedAction | None:
        """The last ``<bash>`` or ``<submit>`` block, tags included (``step`` reads the tag)."""
        return extract_tagged_action(response, TAGGED)

    def _reset(self, task: dict[str, Any], rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
        self._end_episode()
        self._workspace = Workspace(self.limits.workspace_mb, self.limits.workspace_inodes)
        snapshot = task["snapshot"]
        count = unpack(self._panel_file(snapshot), self._workspace.path, self._workspace.uid, snapshot["sha256"])
        self._load_solution(task["verifier"])
        self._shell = Shell(self._workspace, self.limits)
        self._cwd = "/workspace"
        self._metrics = {"commands": 0, "failing_commands": 0, "timeouts": 0, "invalid_actions": 0}
        self._baseline_rng = np.random.default_rng(int(rng.integers(1 << 62)))
        observation = f"{task['instruction']}\n\nThe workspace /workspace holds {count} entries. {self.action_format}."
        info = self._state_info(None, read=True)
        if self.privileged:
            info["privileged"]["expert_plan"] = list(task["reference"])
        return observation, info

    def _panel_file(self, snapshot: dict[str, str]) -> bytes:
        return (panels.panel_dir(self.name) / snapshot["file"]).read_bytes()

    def _load_solution(self, verifier: dict[str, Any]) -> None:
        """The reference solution's tree, read (and checked against its sha256) on the host only."""
        solution = verifier.get("solution")
        if solution is not None and solution["sha256"] != self._solution[0]:
            self._solution = (solution["sha256"], read_files(self._panel_file(solution), solution["sha256"]))

    def _step(self, action: str) -> Transition:
        parsed = parse_action(action)
        if parsed is None:
            self._metrics["invalid_actions"] += 1
            info = self._state_info(None, read=True)
            info["action_valid"] = False
            return Transition(f"No action found: answer with {self.action_format}.", info=info)
        kind, body = parsed
        if kind == "submit":
            return self._submit(body)
        result = self._shell.run(body)
        self._cwd = "/workspace" if result.timed_out or result.restarted else result.cwd
        self._metrics["commands"] += 1
        self._metrics["failing_commands"] += result.exit_code != 0
        self._metrics["timeouts"] += result.timed_out
        info = self._state_info(None, read=True)
        info["action_valid"] = True
        info["parsed_action"] = structure(body)
        return Transition(render(result, self.limits), info=info)

    def _submit(self, answer: str) -> Transition:
        verifier = self._task["verifier"]
        self._read_tree()
        if "checks" in verifier:
            score = self._check_score()
            success = score == 1.0
        else:
            success = answer_matches(verifier, answer)
            score = 1.0 if success else 0.0
        info = self._state_info(score)
        info.update(action_valid=True, success=success)
        verdict = "correct" if success else "not correct"
        return Transition(f"Submitted: {verdict}.", reward=float(success), terminated=True, info=info)

    def _check_score(self) -> float:
        """The share of the task's checks that pass over the workspace as last read, cached by its digest."""
        key = self._tree.digest
        if key not in self._scores:
            passed = check_results(self._task["verifier"], self._solution[1], self._tree, self.limits)
            self._scores[key] = sum(passed) / len(passed)
        return self._scores[key]

    def _read_tree(self) -> None:
        """Read the workspace as it is now (the verdict of a submit is on this read, not an earlier one)."""
        self._tree = read_tree(self._workspace.path, self.limits.workspace_mb << 20)

    def _state_info(self, score: float | None, read: bool = False) -> dict[str, Any]:
        if read:
            self._read_tree()
        if score is None:
            score = self._check_score() if "checks" in self._task["verifier"] else 0.0
        info = {
            "anchor": text_hash(f"{self._task['task_id']}\n{self._tree.digest}\n{self._cwd}"),
            "score": score,
            "metrics": dict(self._metrics),
        }
        if self.privileged:
            action = random_action(self._task["instruction"], self._tree, self._baseline_rng)
            info["privileged"] = {"baseline_actions": {"random": action}}
        return info

    def anchor_paths(self) -> tuple[list[str], list[str]]:
        """Two new files made in either order reach one workspace."""
        first, second = "<bash>touch anchor-a</bash>", "<bash>touch anchor-b</bash>"
        return [first, second], [second, first]

    def _end_episode(self) -> None:
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        if self._workspace is not None:
            self._workspace.close()
            self._workspace = None
        self._scores = {}

    def close(self) -> None:
        self._end_episode()
        super().close()

    def _describe(self) -> dict[str, Any]:
        return {"limits": vars(self.limits).copy(), "dataset": dataset_statistics(self)}


def dataset_statistics(env: TextEnv) -> dict[str, Any]:
    """Per split: tasks per kind, and the spread of instruction lengths and reference lengths."""
    stats: dict[str, Any] = {}
    for split in env.splits():
        tasks = env.tasks(split)
        kinds: dict[str, int] = {}
        for task in tasks:
            kinds[task["task_type"]] = kinds.get(task["task_type"], 0) + 1
        stats[split] = {
            "kinds": dict(sorted(kinds.items())),
            "instruction_chars": _spread([len(t["instruction"]) for t in tasks]),
            "reference_steps": _spread([len(t["reference"]) for t in tasks]),
        }
    return stats


def _spread(values: list[int]) -> dict[str, float]:
    ordered = sorted(values) or [0]
    return {"min": ordered[0], "median": ordered[len(ordered) // 2], "max": ordered[-1]}
