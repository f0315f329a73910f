"""TextWorld games built with TextWorld's own generator, deterministically, and kept in the cache.

A panel row names a game by family, level, held-out kind and seed; :func:`materialise` builds it once
into ``$XDG_CACHE_HOME/agentenvs/textworld/games/v1/`` and checks it against the row's sha256.

Three measures make a game the same on every machine:

- generation runs in a child process with ``PYTHONHASHSEED=0``: TextWorld's generator iterates sets of
  strings, whose order depends on the hash seed;
- directory order, which differs between filesystems and installs, is kept out: the child reads
  TextWorld's logic and grammar files in name order (TextWorld globs them unsorted), and Inform 7,
  whose output follows the order it lists its ``Languages`` folder in, compiles from a home that holds
  English alone; the child runs in an empty folder, so a caller's ``./textworld_data`` cannot replace
  the built-in data, and ``game.json`` records TextWorld's grammar folder relative to the package,
  not where this machine installed it;
- the Z-machine header carries a serial number that Inform 7 sets to the compile date (bytes 18-23),
  so the game's digest leaves those six bytes out (:func:`game_digest`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument, PanelIntegrityError

GENERATOR_VERSION = "1"
GRAMMAR_FOLDER = "textworld/generator/data/text_grammars"
"""Where ``game.json`` says the grammar files are: inside the textworld package, wherever it is installed."""
SERIAL = slice(18, 24)
"""The Z-machine header's serial number (the compile date as YYMMDD)."""

FAMILIES: dict[str, dict[str, Any]] = {
    "simple": {
        "challenge": "tw-simple",
        "max_turns": 50,
        "levels": {
            1: {"rewards": "dense", "goal": "detailed"},
            2: {"rewards": "balanced", "goal": "brief"},
            3: {"rewards": "sparse", "goal": "none"},
        },
    },
    "coin": {
        "challenge": "tw-coin_collector",
        "max_turns": 50,
        "levels": {1: {"level": 5}, 2: {"level": 110}, 3: {"level": 215}},
    },
    "treasure": {
        "challenge": "tw-treasure_hunter",
        "max_turns": 50,
        "levels": {1: {"level": 1}, 2: {"level": 11}, 3: {"level": 21}},
    },
    "cooking": {
        "challenge": "tw-cooking",
        "max_turns": 80,
        "levels": {
            1: {"recipe": 1, "take": 1, "go": 1},
            2: {"recipe": 2, "take": 2, "go": 6, "open": True, "cut": True},
            3: {"recipe": 3, "take": 3, "go": 9, "open": True, "cook": True, "cut": True},
        },
    },
}  # fmt: skip
"""Each family's TextWorld challenge, turn limit and three levels (the challenge's own settings)."""

KINDS = ("train", "valid", "test")
"""Which distribution a game is drawn from: cooking's food and preparations and the simple games'
objects are split by TextWorld itself; coin and treasure games differ by layout seed only."""


def settings(family: str, level: int, kind: str) -> dict[str, Any]:
    """The challenge settings of a family's level, for games of ``kind``."""
    if family not in FAMILIES:
        raise InvalidArgument(f"unknown TextWorld family {family!r}; the families are {sorted(FAMILIES)}")
    levels = FAMILIES[family]["levels"]
    if level not in levels:
        raise InvalidArgument(f"TextWorld family {family!r} has no level {level!r}; its levels are {sorted(levels)}")
    if kind not in KINDS:
        raise InvalidArgument(f"unknown game kind {kind!r}; one of {KINDS}")
    chosen = dict(levels[level])
    if family == "simple":
        chosen["test"] = kind != "train"
    if family == "cooking":
        chosen = {"open": False, "cook": False, "cut": False, "drop": False, **chosen}
        chosen |= {"split": kind, "recipe_seed": 0}
    return chosen


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/agentenvs/textworld`` (``~/.cache/agentenvs/textworld`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "agentenvs" / "textworld"


def game_digest(folder: Path) -> str:
    """sha256 of the game (``game.z8`` less its compile-date serial, then ``game.json``)."""
    story = bytearray((folder / "game.z8").read_bytes())
    story[SERIAL] = b"\0" * (SERIAL.stop - SERIAL.start)
    digest = hashlib.sha256(bytes(story))
    digest.update((folder / "game.json").read_bytes())
    return digest.hexdigest()


def game_folder(task: dict[str, Any]) -> Path:
    """Where a panel row's game is cached: ``games/v{GENERATOR_VERSION}/{task id}-s{seed}``."""
    return cache_dir() / "games" / f"v{GENERATOR_VERSION}" / f"{task['task_id']}-s{task['seed']}"


def regenerate_command(task: dict[str, Any]) -> str:
    return f"agentenvs tasks build textworld --task {task['task_id']} --force"


def generate(family: str, level: int, kind: str, seed: int, folder: Path) -> dict[str, Any]:
    """Build one game into ``folder`` (``game.z8``, ``game.json``) in a child process; its summary."""
    folder = _mkdir(folder.resolve())
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-m", "agentenvs.envs.textworld.games", family, str(level), kind, str(seed), str(folder)]
    with tempfile.TemporaryDirectory(prefix="agentenvs-textworld-cwd-") as empty:
        done = subprocess.run(command, env=environment, cwd=empty, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"generating {family} level {level} seed {seed} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _generate_here(family: str, level: int, kind: str, seed: int, folder: Path) -> dict[str, Any]:
    """The child's work: TextWorld's challenge ``make`` and ``compile_game`` (needs ``PYTHONHASHSEED=0``)."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        raise RuntimeError("TextWorld games are generated with PYTHONHASHSEED=0 (see games.generate)")
    _read_data_files_in_name_order()
    import textworld
    from textworld.challenges import CHALLENGES

    options = textworld.GameOptions()
    options.seeds = seed
    options.path = str(folder / "game.z8")
    options.file_ext = ".z8"
    options.force_recompile = True
    _, make, _ = CHALLENGES[FAMILIES[family]["challenge"]]
    game = make(settings(family, level, kind), options)
    with tempfile.TemporaryDirectory(prefix="agentenvs-inform7-") as home:
        os.environ["INFORM_HOME"] = str(_english_only_inform7(Path(home)))
        textworld.generator.compile_game(game, options)
    (folder / "game.ni").unlink(missing_ok=True)
    _record_grammar_folder_portably(folder / "game.json")
    summary = {"max_score": int(game.max_score), "walkthrough": list(game.walkthrough or [])}
    summary["walkthrough_wins"] = replay(folder / "game.z8", summary["walkthrough"]) == (True, summary["max_score"])
    if "ingredients" in game.metadata:  # cooking: the recipe, which the held-out splits keep out of train
        ingredients = game.metadata["ingredients"]
        summary["recipe"] = sorted([str(food), *sorted(map(str, steps))] for food, *steps in ingredients)
    return summary


def _read_data_files_in_name_order() -> None:
    """TextWorld globs its ``*.twl`` logic and ``*.twg`` grammar files unsorted: directory order, which
    depends on the filesystem and the install, would change the knowledge base and so the game."""
    import glob

    unsorted = glob.glob
    glob.glob = lambda *args, **kwargs: sorted(unsorted(*args, **kwargs))


def _english_only_inform7(home: Path) -> Path:
    """An Inform 7 home of links to TextWorld's own, whose ``Languages`` folder holds English alone."""
    from textworld.generator.inform7.world2inform7 import I7_DEFAULT_PATH

    installed = Path(os.environ.get("INFORM_HOME", I7_DEFAULT_PATH)) / "share" / "inform7"
    inform7 = home / "share" / "inform7"
    _mkdir(inform7 / "Internal" / "Languages")
    (inform7 / "Compilers").symlink_to(installed / "Compilers")
    for entry in (installed / "Internal").iterdir():
        if entry.name != "Languages":
            (inform7 / "Internal" / entry.name).symlink_to(entry)
    (inform7 / "Internal" / "Languages" / "English").symlink_to(installed / "Internal" / "Languages" / "English")
    return home


def _record_grammar_folder_portably(path: Path) -> None:
    """``game.json`` stores TextWorld's grammar folder as an absolute path; keep it package-relative."""
    data = json.loads(path.read_text())
    data["KB"]["text_grammars_path"] = GRAMMAR_FOLDER
    path.write_text(json.dumps(data))


def replay(path: Path, commands: list[str]) -> tuple[bool, int]:
    """Play ``commands`` from the start: (won, points)."""
    import textworld

    env = textworld.start(str(path), request_infos=textworld.EnvInfos(won=True, score=True))
    try:
        state = env.reset()
        for command in commands:
            state, _, _ = env.step(command)
        return bool(state["won"]), int(state["score"])
    finally:
        env.close()


def materialise(task: dict[str, Any]) -> Path:
    """The ``game.z8`` of a panel row: built into the cache once, then checked against ``game_sha256``."""
    folder = game_folder(task)
    path = folder / "game.z8"
    if not path.is_file():
        scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=_mkdir(folder.parent)))
        try:
            generate(task["family"], int(task["level"]), task["kind"], int(task["seed"]), scratch)
            _check(task, scratch, "the newly generated game")
            if not path.is_file():  # another process may have finished the same game meanwhile
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(scratch, folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    try:
        _check(task, folder, f"the cached game {path}")
    except (OSError, ValueError) as exc:
        raise PanelIntegrityError(
            f"the cached game {path} cannot be read ({exc}); rebuild it: {regenerate_command(task)}"
        ) from exc
    return path


def _check(task: dict[str, Any], folder: Path, what: str) -> None:
    digest = game_digest(folder)
    if digest != task["game_sha256"]:
        raise PanelIntegrityError(
            f"task {task['task_id']}: {what} ({folder}) has sha256 {digest}, the panel records {task['game_sha256']}. "
            f"A corrupt cached file: rebuild it with `{regenerate_command(task)}`; if a rebuilt game differs too, "
            "TextWorld is not 1.7.0 (pip install 'agentenvs[textworld]')."
        )


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


if __name__ == "__main__":
    family_, level_, kind_, seed_, folder_ = sys.argv[1:6]
    summary = _generate_here(family_, int(level_), kind_, int(seed_), Path(folder_))
    print(json.dumps(summary))
