"""A command's shell structure, parsed with bashlex: programs, pipes, redirections and list operators.

It goes into ``info["parsed_action"]`` so trainers and analyses can see what kind of command the
agent wrote (a pipeline of grep and sort, a redirection into a file) without re-parsing it.
"""

from __future__ import annotations

from typing import Any


def structure(command: str) -> dict[str, Any]:
    """``{"programs", "pipes", "redirections", "operators"}``, or ``{"parse_error"}`` where bashlex gives up."""
    import bashlex

    class Visitor(bashlex.ast.nodevisitor):
        def __init__(self) -> None:
            self.programs: list[str] = []
            self.pipes = 0
            self.redirections: list[str] = []
            self.operators: list[str] = []

        def visitcommand(self, node: Any, parts: list[Any]) -> None:
            words = [part.word for part in parts if part.kind == "word"]
            if words:
                self.programs.append(words[0])

        def visitpipe(self, node: Any, pipe: str) -> None:
            self.pipes += 1

        def visitredirect(self, node: Any, source: Any, kind: str, target: Any, heredoc: Any) -> None:
            self.redirections.append(kind)

        def visitoperator(self, node: Any, op: str) -> None:
            self.operators.append(op)

    visitor = Visitor()
    try:
        for tree in bashlex.parse(command):
            visitor.visit(tree)
    except Exception as exc:  # bashlex raises its own errors and, on odd input, assorted others
        return {"parse_error": f"{type(exc).__name__}: {exc}"[:200]}
    return {
        "programs": visitor.programs,
        "pipes": visitor.pipes,
        "redirections": visitor.redirections,
        "operators": visitor.operators,
    }
