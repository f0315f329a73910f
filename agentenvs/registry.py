"""The environment registry: names to entry points, imported only when an environment is made.

``agentenvs.make("bandit")`` builds an environment in-process. Every registered name is also a
gymnasium id (``gymnasium.make("agentenvs/Bandit-v0")``); those are registered with gymnasium as soon
as gymnasium is imported, so ``import agentenvs`` itself does not pay for importing gymnasium.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

from agentenvs.errors import InvalidArgument, MissingDependency, UnknownEnv

if TYPE_CHECKING:
    from agentenvs.core import TextEnv


class EnvSpec(NamedTuple):
    """How to build one registered environment."""

    name: str
    entry_point: str
    gym_id: str
    summary: str = ""
    extra: str | None = None
    """The pip extra that installs the environment's engine (``pip install 'agentenvs[extra]'``)."""
    kwargs: dict[str, Any] | None = None


_REGISTRY: dict[str, EnvSpec] = {}


def register(
    name: str,
    entry_point: str,
    *,
    gym_id: str | None = None,
    summary: str = "",
    extra: str | None = None,
    kwargs: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> EnvSpec:
    """Register an environment class under ``name`` (``entry_point`` is ``"module:Class"``)."""
    if ":" not in entry_point:
        raise InvalidArgument(f"entry_point {entry_point!r} must look like 'package.module:ClassName'")
    if name in _REGISTRY and not overwrite:
        raise InvalidArgument(f"environment {name!r} is already registered; pass overwrite=True to replace it")
    spec = EnvSpec(
        name=name,
        entry_point=entry_point,
        gym_id=gym_id or f"agentenvs/{name.title().replace('_', '')}-v0",
        summary=summary,
        extra=extra,
        kwargs=dict(kwargs or {}),
    )
    _REGISTRY[name] = spec
    if "gymnasium" in sys.modules:
        _register_with_gymnasium(spec)
    return spec


def spec(name: str) -> EnvSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownEnv(
            f"no environment named {name!r}; registered: {', '.join(sorted(_REGISTRY))} (`agentenvs list` shows them)"
        ) from None


def list_envs() -> list[str]:
    """Every registered environment name, sorted."""
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
