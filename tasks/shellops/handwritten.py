"""The hand-written ShellOps tasks (split ``demo``) over one small Python project, ``PROJECT``.

Three information extractions, two edits (a setting, a bug that ``tests/check_stock.py`` detects) and
one chained task (find a function's uses, then rename it everywhere). Each edit names the files it
changes, its checks and the text replacements that give its solution tree.
"""

from __future__ import annotations

from agentenvs.tasks.shellops.mining import Candidate, task_row

PROJECT = {
    "README.md": "# inventory\n\nA tiny stock-keeping library.\n",
    "setup.cfg": "[metadata]\nname = inventory\nversion = 1.4.2\n",
    "inventory/__init__.py": (
        "from inventory.report import format_report\n"
        'from inventory.stock import Stock, total_value\n\nVERSION = "1.4.2"\n'
    ),
    "inventory/config.py": 'MAX_ITEMS = 500\nCURRENCY = "EUR"\n',
    "inventory/stock.py": (
        "from inventory.config import MAX_ITEMS\n\n\n"
        "def total_value(items):\n    return sum(price - qty for price, qty in items)\n\n\n"
        "class Stock:\n    def __init__(self):\n        self.items = {}\n\n"
        "    def add(self, name, price, qty):\n        if len(self.items) >= MAX_ITEMS:\n"
        '            raise ValueError("full")\n        self.items[name] = (price, qty)\n'
    ),
    "inventory/report.py": (
        "from inventory.stock import total_value\n\n\n"
        "def format_report(stock):\n"
        '    return f"{len(stock.items)} items worth {total_value(stock.items.values())}"\n'
    ),
    "tests/check_stock.py": (
        "import os\nimport sys\n\nsys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n"
        "from inventory.stock import Stock, total_value  # noqa: E402\n\n"
        "assert total_value([(2, 3), (5, 1)]) == 11, 'total_value is wrong'\n"
        "stock = Stock()\nstock.add('pen', 2, 3)\nassert stock.items == {'pen': (2, 3)}\nprint('ok')\n"
    ),
}


def _task(task_id: str, kind: str, instruction: str, verifier: dict, reference: list[str]) -> dict:
    return {**task_row(task_id, kind, instruction, verifier, reference, 10), "source": "hand-written: inventory"}


def _edit(task: dict, changes: dict[str, tuple[str, str]], checks: list[dict]) -> Candidate:
    """An edit over the project: ``changes`` maps a path to the text it replaces and its replacement."""
    solution = {path: text.encode() for path, text in PROJECT.items()}
    for path, (old, new) in changes.items():
        solution[path] = PROJECT[path].replace(old, new).encode()
    files = {path: text.encode() for path, text in PROJECT.items()}
    return Candidate(task, files, solution, tuple(sorted(changes)), ({"name": "files-kept", "kind": "files-kept"},
                     *checks))  # fmt: skip


def tasks() -> list[Candidate]:
    """The six tasks as candidates (the generator adds the snapshots and the imports checks)."""
    files = {path: text.encode() for path, text in PROJECT.items()}
    rename = ("format_report", "render_report")
    questions = [
        _task(
            "inventory-where-total-value",
            "extract",
            "In which file is the function `total_value` defined? Submit its path relative to /workspace.",
            {"answer": "inventory/stock.py", "match": "exact"},
            ["<bash>grep -rln 'def total_value' .</bash>", "<submit>inventory/stock.py</submit>"],
        ),
        _task(
            "inventory-importers-of-stock",
            "extract",
            "Which files import the module `inventory.stock`? Submit their paths relative to /workspace, one per line.",
            {"answer": "inventory/__init__.py\ninventory/report.py\ntests/check_stock.py", "match": "lines"},
            [
                "<bash>grep -rl 'from inventory.stock import' .</bash>",
                "<submit>inventory/__init__.py\ninventory/report.py\ntests/check_stock.py</submit>",
            ],
        ),
        _task(
            "inventory-count-py-files",
            "extract",
            "How many Python (.py) files does the workspace hold? Submit the number.",
            {"answer": "5", "match": "exact"},
            ["<bash>find . -name '*.py' | wc -l</bash>", "<submit>5</submit>"],
        ),
    ]
    edits = [
        _edit(
            _task(
                "inventory-raise-max-items",
                "edit",
                "Raise the setting MAX_ITEMS to 1000; change nothing else. Submit done when finished.",
                {},
                [
                    "<bash>sed -i 's/^MAX_ITEMS = 500$/MAX_ITEMS = 1000/' inventory/config.py</bash>",
                    "<submit>done</submit>",
                ],
            ),
            {"inventory/config.py": ("MAX_ITEMS = 500", "MAX_ITEMS = 1000")},
            [{"name": "max-items-1000", "kind": "same-syntax"}],
        ),
        _edit(
            _task(
                "inventory-fix-total-value",
                "edit",
                "`python3 tests/check_stock.py` fails: a bug was put "
                "into the library. Fix the library (not the test), changing nothing else, so the check passes; "
                "then submit done.",
                {},
                [
                    "<bash>python3 tests/check_stock.py</bash>",
                    "<bash>grep -n 'price - qty' -r inventory</bash>",
                    "<bash>sed -i 's/price - qty/price * qty/' inventory/stock.py</bash>",
                    "<submit>done</submit>",
                ],
            ),
            {"inventory/stock.py": ("price - qty", "price * qty")},
            [
                {"name": "library-fixed", "kind": "same-syntax"},
                {"name": "check-stock-passes", "kind": "script", "path": "tests/check_stock.py"},
            ],
        ),
        _edit(
            _task(
                "inventory-rename-format-report",
                "chained",
                "Find where the function `format_report` is "
                "defined and used, and rename it to `render_report` everywhere; change nothing else. Submit "
                "done when finished.",
                {},
                [
                    "<bash>grep -rlw format_report --include='*.py' .</bash>",
                    "<bash>grep -rlw format_report --include='*.py' . | xargs sed -i "
                    "'s/\\bformat_report\\b/render_report/g'</bash>",
                    "<submit>done</submit>",
                ],
            ),
            {"inventory/__init__.py": rename, "inventory/report.py": rename},
            [
                {"name": "renamed-code", "kind": "same-syntax"},
                {"name": "references-kept", "kind": "renamed", "old": rename[0], "new": rename[1]},
            ],
        ),
    ]
    return [Candidate(question, files) for question in questions] + edits
