"""The real ALFWorld text engine (TextWorld's PDDL backend) behind one small interface.

The wrapper stack is ALFWorld's own: ``PddlEnv`` + ``AlfredDemangler`` + ``AlfredInfos``, plus
``AlfredExpert(expert_type="planner")`` when the expert plan is wanted. It is built here rather than
through ``AlfredTWEnv.init_env``, which in alfworld 0.4.2 passes ``expert_type`` positionally and so
always gets the handcoded expert.

Two measures keep the engine out of the user's home and fast:

- ``import alfworld`` creates ``$ALFWORLD_DATA`` (``~/.cache/alfworld`` when unset) and writes the
  variable; :func:`import_alfworld` imports it with the variable pointing into the agentenvs cache
  (unless the user set it) and puts the environment back, so no import of agentenvs changes
  ``os.environ``;
- fast-downward's PDDL→SAS translation, a pure function of (domain, problem), is memoised, so
  ``load`` + ``reset`` of one game and every later reset of it translate once instead of four times.
  The translator also overwrites ``sys.argv`` and module-level options; the memo puts ``sys.argv``
  back and lets one thread translate at a time (a server worker runs sessions on several threads).
- TextWorld re-parses (with tatsu) the same grammar rules and logic queries at every load and for
  every admissible command of every step; those parses are pure functions of their text, so they are
  memoised too (a fresh copy is handed out each time, as a parse would). ``tests/envs/test_alfworld.py``
  checks that transcripts with and without these memos are identical.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import threading
from collections import OrderedDict
from copy import deepcopy
from pathlib import Path
from types import ModuleType
from typing import Any


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/agentenvs/alfworld`` (``~/.cache/agentenvs/alfworld`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "agentenvs" / "alfworld"


def user_data_dir() -> str | None:
    """Where the user's official ALFWorld data lives (``ALFWORLD_DATA``), or None."""
    return os.environ.get("ALFWORLD_DATA") or None


ENGINE_LOCK = threading.RLock()
"""Held around calls into TextWorld, whose parsers (tatsu) and fast-downward's translator are shared by
every game in the process and not thread-safe; the textworld environment holds it too."""


def import_alfworld() -> None:
    """Import the alfworld wheel, whose import creates ``$ALFWORLD_DATA`` and sets the variable:
    unset, it points into the agentenvs cache for the import only, and the environment is put back."""
    if "alfworld" in sys.modules:
        return
    with ENGINE_LOCK:
        previous = os.environ.get("ALFWORLD_DATA")
        os.environ["ALFWORLD_DATA"] = previous or str(cache_dir() / "alfworld_data")
        try:
            import alfworld  # noqa: F401
        finally:
            if previous is None:
                os.environ.pop("ALFWORLD_DATA", None)
            else:
                os.environ["ALFWORLD_DATA"] = previous


def alfworld_gen(name: str) -> ModuleType:
    """``alfworld.gen.<name>`` (the wheel's tables), imported through :func:`import_alfworld`."""
    import_alfworld()
    return importlib.import_module(f"alfworld.gen.{name}")


class _MemoisedTranslator:
    """Stands in for the ``fast_downward`` module inside TextWorld's PDDL logic; only
    ``pddl2sas`` differs: it is memoised (a few recent problems) and leaves ``sys.argv`` alone."""

    def __init__(self, module: Any, size: int = 8):
        self._module = module
        self._size = size
        self._memo: OrderedDict[str, Any] = OrderedDict()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def pddl2sas(self, domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
        key = hashlib.sha256(f"{optimize}\x1f{domain}\x1f{problem}".encode()).hexdigest()
        found = self._memo.get(key)
        if found is not None:
            return found
        with ENGINE_LOCK:
            if key in self._memo:
                return self._memo[key]
            argv = list(sys.argv)
            try:
                result = self._module.pddl2sas(domain, problem, verbose=verbose, optimize=optimize)
            finally:
                sys.argv[:] = argv
            self._memo[key] = result
            while len(self._memo) > self._size:
                self._memo.popitem(last=False)
        return result


class _MemoisedParser:
    """A memo in front of a module's ``_parse_and_convert(text, rule_name=...)``."""

    def __init__(self, parse: Any):
        self._parse = parse
        self._memo: dict[tuple[Any, ...], Any] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("trace", None)
        key = (*args, *sorted(kwargs.items()))
        if key not in self._memo:
            with ENGINE_LOCK:  # tatsu's parser object is shared and not thread-safe
                if key not in self._memo:
                    self._memo[key] = self._parse(*args, **kwargs)
        return deepcopy(self._memo[key])


def install_engine_memos(enabled: bool = True) -> None:
    """Put the memos in front of TextWorld's translator and parsers (or take them away)."""
    import textworld.logic
    from textworld.envs.pddl import logic, textgen

    for module, attribute, memo in (
        (logic, "fast_downward", _MemoisedTranslator),
        (textgen, "_parse_and_convert", _MemoisedParser),
        (textworld.logic, "_parse_and_convert", _MemoisedParser),
    ):
        current = getattr(module, attribute)
        installed = isinstance(current, memo)
        if enabled and not installed:
            setattr(module, attribute, memo(current))
        elif not enabled and installed:
            setattr(module, attribute, current._module if memo is _MemoisedTranslator else current._parse)


class AlfredEngine:
    """One ALFWorld game at a time on TextWorld's PDDL engine.

    ``expert=True`` adds ALFWorld's planner expert: after every reset and step the state carries
    ``extra.expert_plan``, fast-downward's plan from the current state (it replans each turn).
    """

    def __init__(self, *, expert: bool = False):
        import_alfworld()
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos
        from textworld.envs import PddlEnv

        install_engine_memos()
        infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=True, policy_commands=expert)
        stack = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
        self.env = AlfredExpert(stack, expert_type="planner") if expert else stack
        self.expert = expert
        self._loaded: str | None = None

    def load(self, game_path: str) -> None:
        """Load a ``game.tw-pddl`` file; a no-op when that path is the loaded one, so callers name
        game files by content (the cache does) or never rewrite them (official data)."""
        if game_path != self._loaded:
            with ENGINE_LOCK:
                self.env.load(game_path)
            self._loaded = game_path

    def reset(self) -> Any:
        with ENGINE_LOCK:  # TextWorld's parsers and fast-downward's translator are shared, not thread-safe
            return self.env.reset()

    def step(self, command: str) -> tuple[Any, float, bool]:
        with ENGINE_LOCK:
            return self.env.step(command)

    def close(self) -> None:
        self.env.close()
        self._loaded = None
