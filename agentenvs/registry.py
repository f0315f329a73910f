"""The environment registry: names to entry points, imported only when an environment is made.

``agentenvs.make("bandit")`` builds an environment in-process. Every registered name is also a
gymnasium id (``gymnasium.make("agentenvs/Bandit-v0")``); those are registered with gymnasium as soon
as gymnasium is imported, so ``import agentenvs`` itself does not pay for importing gymnasium.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from typing import TYPE_CHECKING, Any, NamedTuple

from agentenvs.errors import InvalidArgument, MissingDependency, UnknownEnv

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from agentenvs.core import TextEnv


ENTRY_POINT_GROUP = "agentenvs.envs"
"""The ``importlib.metadata`` group every environment package declares itself in (docs/adding-an-environment.md)."""


class EnvSpec(NamedTuple):
    """Everything the suite knows about an environment before importing it: declared once, in its package."""

    name: str
    entry_point: str
    """``"package.module:ClassName"`` of the ``TextEnv`` subclass."""
    gym_id: str
    version: str = "0"
    summary: str = ""
    extra: str | None = None
    """The pip extra that installs the environment's engine (``pip install 'agentenvs[extra]'``)."""
    max_turns: int = 50
    """The default turn limit; a task may set its own and a caller's ``max_turns`` overrides both."""
    panels: str | None = None
    """The package whose folder holds ``manifest.json`` and ``panels/<split>.jsonl``."""
    kwargs: dict[str, Any] | None = None
    inline: bool = False
    """Cheap and safe: pure Python that cannot hang, leak or crash its process. A server may then run its
    sessions in its own process, without the hop to a worker process (``agentenvs serve --isolate`` refuses)."""


_REGISTRY: dict[str, EnvSpec] = {}
_DISCOVERED = False
_READY = False
_DISCOVERY_LOCK = threading.RLock()
"""Held while discovering: a thread that finds discovery under way waits for it instead of seeing a half-filled
registry (a server worker's first concurrent sessions). Reentrant: a module it imports may call ``register``."""


def _add(entry: EnvSpec, *, overwrite: bool) -> EnvSpec:
    if ":" not in entry.entry_point:
        raise InvalidArgument(f"entry_point {entry.entry_point!r} must look like 'package.module:ClassName'")
    if entry.name in _REGISTRY and not overwrite and _REGISTRY[entry.name] != entry:
        raise InvalidArgument(f"environment {entry.name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[entry.name] = entry
    if "gymnasium" in sys.modules:
        _register_with_gymnasium(entry)
    return entry


def register(
    name: str,
    entry_point: str,
    *,
    gym_id: str | None = None,
    overwrite: bool = False,
    **fields: Any,
) -> EnvSpec:
    """Register an environment at run time (a package declares its ``EnvSpec`` under ``ENTRY_POINT_GROUP``)."""
    _discover()
    gym_id = gym_id or f"agentenvs/{name.title().replace('_', '')}-v0"
    fields["kwargs"] = dict(fields.get("kwargs") or {})
    return _add(EnvSpec(name=name, entry_point=entry_point, gym_id=gym_id, **fields), overwrite=overwrite)


def _specs_of(entry_point: EntryPoint) -> list[EnvSpec]:
    """An entry point names an ``EnvSpec`` or a callable returning ``EnvSpec``s (the built-ins use one)."""
    loaded = entry_point.load()
    found = loaded() if callable(loaded) and not isinstance(loaded, EnvSpec) else loaded
    found = [found] if isinstance(found, EnvSpec) else list(found)
    wrong = [item for item in found if not isinstance(item, EnvSpec)]
    if wrong:
        raise InvalidArgument(
            f"entry point {entry_point.name} = {entry_point.value!r} in group {ENTRY_POINT_GROUP!r} gave "
            f"{wrong[0]!r}; it must name an agentenvs.EnvSpec or a function returning EnvSpecs"
        )
    return found


def _discover() -> None:
    """Register every environment the installed packages declare, once, on first use of the registry."""
    global _DISCOVERED, _READY
    if _READY:
        return
    with _DISCOVERY_LOCK:
        if _DISCOVERED:  # done by the thread we waited for, or under way in this very thread (reentry)
            return
        _DISCOVERED = True
        from importlib.metadata import entry_points  # 20 ms of imports: paid on first use, not by `import agentenvs`

        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            for entry in _specs_of(entry_point):
                _REGISTRY.setdefault(entry.name, entry)
                if "gymnasium" in sys.modules:
                    _register_with_gymnasium(entry)
        _READY = True


def spec(name: str) -> EnvSpec:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownEnv(
            f"no environment named {name!r}; registered: {', '.join(sorted(_REGISTRY))} (`agentenvs list` shows them)"
        ) from None


def list_envs() -> list[str]:
    """Every registered environment name, sorted."""
    _discover()
    return sorted(_REGISTRY)


def load_class(entry_point: str, extra: str | None = None) -> type:
    module_name, _, attr = entry_point.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise
        hint = f"pip install 'agentenvs[{extra}]'" if extra else "pip install the missing package"
        raise MissingDependency(f"{entry_point} needs the package {exc.name!r}: {hint} (or `make install`)") from exc
    return getattr(module, attr)


def env_class(name: str) -> type[TextEnv]:
    entry = spec(name)
    return load_class(entry.entry_point, entry.extra)


def make(name: str, **kwargs: Any) -> TextEnv:
    """Build the environment registered as ``name``; keywords go to its constructor."""
    entry = spec(name)
    cls = load_class(entry.entry_point, entry.extra)
    return cls(**{**(entry.kwargs or {}), **kwargs})


def _register_with_gymnasium(entry: EnvSpec) -> None:
    import gymnasium

    if entry.gym_id not in gymnasium.registry:
        gymnasium.register(id=entry.gym_id, entry_point=entry.entry_point, kwargs=dict(entry.kwargs or {}))


def register_all_with_gymnasium() -> None:
    """Make every registered environment a gymnasium id (called once gymnasium is imported)."""
    _discover()
    for entry in _REGISTRY.values():
        _register_with_gymnasium(entry)


class _GymnasiumImportHook:
    """Registers our gymnasium ids right after ``import gymnasium`` completes, wherever it happens."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "gymnasium":
            return None
        sys.meta_path.remove(self)
        try:
            found = importlib.util.find_spec("gymnasium")
        finally:
            sys.meta_path.insert(0, self)
        if found is None or found.loader is None:
            return found
        original_exec = found.loader.exec_module

        def exec_module(module: Any) -> None:
            original_exec(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            register_all_with_gymnasium()

        found.loader.exec_module = exec_module  # type: ignore[method-assign]
        return found


def install_gymnasium_hook() -> None:
    if "gymnasium" in sys.modules:
        register_all_with_gymnasium()
    elif not any(isinstance(hook, _GymnasiumImportHook) for hook in sys.meta_path):
        sys.meta_path.insert(0, _GymnasiumImportHook())
