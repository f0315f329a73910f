"""``agentenvs list``, ``agentenvs describe NAME`` and ``agentenvs play NAME``: look at and try environments."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import re
import sys
import textwrap
from typing import Any

from agentenvs import errors, registry

QUIT_WORDS = frozenset({"quit", "exit", ":q"})
MAX_SHOWN_ACTIONS = 40


def configure(parser: argparse.ArgumentParser, name: str) -> None:
    if name == "list":
        parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
        return
    parser.add_argument("name", help="a registered environment (see `agentenvs list`)")
    if name == "describe":
        parser.add_argument("--json", action="store_true", help="print the full description as JSON")
        return
    parser.description = (
        "Play an environment yourself: it shows the observation and the admissible actions; type an action "
        "and press Enter. Type 'quit' or press Ctrl-D to stop."
    )
    parser.add_argument("--task-id", default=None, help="the task to play (default: one chosen by the seed)")
    parser.add_argument("--split", default=None, help="the panel split (default: the environment's default split)")
    parser.add_argument("--seed", type=int, default=0, help="episode seed; the same task and seed replay exactly")


def run(args: argparse.Namespace) -> int:
    command = {"list": list_command, "describe": describe_command, "play": play_command}[args.command]
    try:
        return command(args)
    except errors.AgentEnvsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


# ---------------------------------------------------------------------- list


def _extra_requirements(extra: str) -> list[str]:
    """The distribution names that ``pip install 'agentenvs[extra]'`` installs."""
    try:
        requires = importlib.metadata.requires("agentenvs") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    names = []
    for requirement in requires:
        requirement_part, _, markers = requirement.partition(";")
        if marker.search(markers):
            names.append(re.match(r"[A-Za-z0-9._-]+", requirement_part.strip()).group(0))
    return names


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def engine_status(entry: registry.EnvSpec) -> tuple[bool, str]:
    """Whether the environment can be made here, and if not what is missing and how to get it.

    Looks only at package metadata and module specs, so it imports no engine.
    """
    module = entry.entry_point.partition(":")[0]
    package = module.rpartition(".")[0] or module  # a top-level module is its own package
    try:
        found = importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return False, f"{package} is not part of this installation"
    if entry.extra:
        missing = [name for name in _extra_requirements(entry.extra) if not _installed(name)]
        if missing:
            return False, f"needs {', '.join(missing)}: pip install 'agentenvs[{entry.extra}]'"
    return True, "ready"


def list_command(args: argparse.Namespace) -> int:
    rows = []
    for entry in map(registry.spec, registry.list_envs()):
        ready, note = engine_status(entry)
        rows.append(
            {"name": entry.name, "gym_id": entry.gym_id, "installed": ready, "note": note, "summary": entry.summary}
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [("NAME", "GYM ID", "ENGINE", "SUMMARY")]
    table += [(r["name"], r["gym_id"], "ready" if r["installed"] else "missing", r["summary"]) for r in rows]
    widths = [max(len(row[column]) for row in table) for column in range(3)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3])
    for row in rows:
        if not row["installed"]:
            print(f"{row['name']}: {row['note']}")
    return 0


# ---------------------------------------------------------------------- describe


def _yes(flag: Any) -> str:
    return ("yes" if flag else "no") if isinstance(flag, bool) else str(flag)


def describe_command(args: argparse.Namespace) -> int:
    entry = registry.spec(args.name)
    env = registry.make(args.name)
    try:
        description = {"gym_id": entry.gym_id, "summary": entry.summary, **env.describe()}
    finally:
        env.close()
    if args.json:
        print(json.dumps(description, indent=2, sort_keys=True))
        return 0
    print(format_description(description))
    return 0


def format_description(description: dict[str, Any]) -> str:
    """A person's view of ``env.describe()``: the standard fields first, then the environment's own."""
    standard = (
        "name", "version", "gym_id", "summary", "splits", "default_split", "max_turns", "max_action_chars",
        "reward_range", "action_format", "instructions", "capabilities",
    )  # fmt: skip
    splits = ", ".join(f"{name} ({count} tasks)" for name, count in description["splits"].items())
    capabilities = ", ".join(f"{key}: {_yes(value)}" for key, value in description["capabilities"].items())
    low, high = description["reward_range"]
    lines = [
        f"{description['name']} {description['version']} ({description['gym_id']})",
        f"  {description['summary']}",
        f"splits:        {splits} (default: {description['default_split']})",
        f"max_turns:     {description['max_turns']}",
        f"reward range:  [{low}, {high}]",
        f"action format: {description['action_format']}",
        f"action limit:  {description['max_action_chars']} characters",
        f"capabilities:  {capabilities}",
        "instructions:",
        textwrap.indent(textwrap.fill(description["instructions"], width=100) or "(none)", "  "),
    ]
    for key, value in description.items():
        if key not in standard:
            shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            lines.append(f"{key}: {shown}")
    return "\n".join(lines)


# ---------------------------------------------------------------------- play


def _read_action() -> str | None:
    """The next line a person typed, or ``None`` when they quit (EOF, Ctrl-C or a quit word)."""
    try:
        line = input("> ")
    except (EOFError, KeyboardInterrupt):
        print()
        return None
    return None if line.strip().lower() in QUIT_WORDS else line.strip()


def _show_actions(info: dict[str, Any]) -> None:
    actions = info.get("admissible_actions")
    if not actions:
        return
    shown = ", ".join(actions[:MAX_SHOWN_ACTIONS])
    more = f" ... and {len(actions) - MAX_SHOWN_ACTIONS} more" if len(actions) > MAX_SHOWN_ACTIONS else ""
    print(f"[admissible actions] {shown}{more}")


def _show_end(info: dict[str, Any], total: float) -> None:
    print(f"[episode over] end: {info.get('end_reason')}, success: {_yes(info.get('success'))}, return: {total:.3f}")
    if "score" in info:
        print(f"[score] {info['score']:.3f}")
    for name, value in sorted(info.get("metrics", {}).items()):
        print(f"[metric] {name}: {value:.4g}")


def play_command(args: argparse.Namespace) -> int:
    env = registry.make(args.name)
    options = {key: value for key, value in (("task_id", args.task_id), ("split", args.split)) if value is not None}
    try:
        observation, info = env.reset(seed=args.seed, options=options)
        print(f"[{args.name}] task {info['task_id']} (split {info['split']}, seed {args.seed}).")
        print("Type an action and press Enter; 'quit' or Ctrl-D stops.\n")
        total = 0.0
        while True:
            print(observation)
            _show_actions(info)
            action = _read_action()
            if action is None:
                print(f"[quit] after {info['turn']} turns, return {total:.3f}")
                return 0
            try:
                observation, reward, terminated, truncated, info = env.step(action)
            except (errors.ActionTooLong, errors.InvalidActionType) as exc:
                print(f"[not sent] {exc}")
                continue
            total += reward
            valid = "" if info.get("action_valid", True) else " (the action was not carried out)"
            print(f"[reward] {reward:+.3f}{valid}   turn {info['turn']}/{info['max_turns']}\n")
            if terminated or truncated:
                print(observation)
                _show_end(info, total)
                return 0
    finally:
        env.close()
