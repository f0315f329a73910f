"""Run every benchmark (``bench/bench_*.py``) one after another; each writes ``bench/results/<name>.json``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failures = []
    scripts = sorted(HERE.glob("bench_*.py"))
    for index, script in enumerate(scripts, 1):
        print(f"[{index}/{len(scripts)}] {script.name}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent)
        print(f"    {'ok' if code == 0 else f'FAILED ({code})'} in {time.perf_counter() - started:.1f} s", flush=True)
        if code:
            failures.append(script.name)
    print(f"results in {HERE / 'results'}; failed: {failures or 'none'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
