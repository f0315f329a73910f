"""The built-in environments, one subpackage each; every subpackage declares its ``SPEC``.

The ``agentenvs.envs`` entry point of this distribution names :func:`specs`, so the built-ins are
found the same way as a third-party package's environments, and a new subpackage (``agentenvs
new-env``) is found without a reinstall.
"""

from __future__ import annotations

import importlib
import pkgutil

from agentenvs.registry import EnvSpec


def specs() -> list[EnvSpec]:
    """The ``SPEC`` of every subpackage of this folder."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.ispkg:
            declared = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SPEC", None)
            if isinstance(declared, EnvSpec):
                found.append(declared)
    return found
