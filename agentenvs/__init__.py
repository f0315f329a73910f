"""agentenvs: standardized multi-turn text environments for training and evaluating LLM agents.

``import agentenvs`` is kept light: the environment base class, the HTTP client and the conformance
checks are imported on first use.
"""

import importlib as _importlib
from typing import Any as _Any

from agentenvs import errors
from agentenvs.actions import ExtractedAction, extract_action
from agentenvs.registry import EnvSpec, env_class, list_envs, make, register, spec
from agentenvs.registry import install_gymnasium_hook as _install_gymnasium_hook

__version__ = "0.1.0"

_LAZY = {
    "TextEnv": "agentenvs.core",
    "Transition": "agentenvs.core",
    "connect": "agentenvs.client",
    "RemoteEnv": "agentenvs.client",
    "EnvPool": "agentenvs.client",
    "RayEnvPool": "agentenvs.ray_pool",
    "check_text_env": "agentenvs.testing",
}


def __getattr__(name: str) -> "_Any":
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentenvs' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def describe(name: str, **kwargs: "_Any") -> "dict[str, _Any]":
    """The self-description of a registered environment (see ``TextEnv.describe``)."""
    env = make(name, **kwargs)
    try:
        return env.describe()
    finally:
        env.close()


_install_gymnasium_hook()

__all__ = [
    "EnvSpec",
    "ExtractedAction",
    "describe",
    "env_class",
    "errors",
    "extract_action",
    "list_envs",
    "make",
    "register",
    "spec",
    *_LAZY,
]
