"""How long ``import agentenvs`` takes in a fresh interpreter, net of the interpreter's own start.

Runs ``python -c "import agentenvs"`` and ``python -c "pass"`` alternately in fresh subprocesses
(so both see the same machine load), and reports both medians and their difference; the target for
the difference is under 0.3 s. ``python -X importtime`` then names the slowest imported modules.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from common import summarize, write_result  # bench/common.py: scripts run as `python bench/<script>.py`

RUNS = 21
TARGET_S = 0.3
STATEMENTS = {"bare": "pass", "import": "import agentenvs"}


def time_fresh(statement: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True)
    return time.perf_counter() - started


def slowest_imports(top: int = 10) -> list[dict[str, object]]:
    """The modules with the largest cumulative import time under ``-X importtime``."""
    report = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", STATEMENTS["import"]], capture_output=True, text=True, check=True
    ).stderr
    rows = []
    for line in report.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, self_us, cumulative_us, module = (part.strip() for part in line.replace("import time:", "|").split("|"))
        rows.append({"module": module, "cumulative_ms": int(cumulative_us) / 1000, "self_ms": int(self_us) / 1000})
    return sorted(rows, key=lambda row: row["cumulative_ms"], reverse=True)[:top]


def heavy_modules_loaded() -> list[str]:
    """Heavy packages that ``import agentenvs`` must not pull in."""
    probe = (
        "import sys, agentenvs; heavy = ('gymnasium', 'torch', 'transformers', 'flask', 'alfworld', 'scienceworld'); "
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    return [name for name in out.split(",") if name]


def main() -> int:
    samples: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    time_fresh("pass")  # warm the file cache before measuring
    for _ in range(RUNS):
        for name, statement in STATEMENTS.items():
            samples[name].append(time_fresh(statement))
    net = statistics.median(samples["import"]) - statistics.median(samples["bare"])
    result = {
        "runs": RUNS,
        "bare_interpreter": summarize(samples["bare"]),
        "interpreter_plus_import": summarize(samples["import"]),
        "import_agentenvs_net_ms": net * 1000,
        "target_ms": TARGET_S * 1000,
        "within_target": net < TARGET_S,
        "heavy_modules_loaded": heavy_modules_loaded(),
        "slowest_imports": slowest_imports(),
        "note": "medians of fresh subprocesses run alternately",
    }
    write_result("import", result)
    return 0 if result["within_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
