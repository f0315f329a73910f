"""The errors of the environment contract.

Each error names what to do about it, carries a stable ``code`` for the wire protocol and the
HTTP status a server answers with, and subclasses the builtin exception a Python user would catch.
"""

from __future__ import annotations


class AgentEnvsError(Exception):
    """Base class: every misuse of an agentenvs environment raises a subclass of this."""

    code = "error"
    http_status = 400


class ResetNeeded(AgentEnvsError, RuntimeError):
    """``step`` was called before the first ``reset``."""

    code = "reset_needed"
    http_status = 409


class EpisodeOver(AgentEnvsError, RuntimeError):
    """``step`` was called after the episode terminated or was truncated."""

    code = "episode_over"
    http_status = 409


class InvalidActionType(AgentEnvsError, TypeError):
    """The action is not a ``str``."""

    code = "invalid_action_type"
    http_status = 422


class ActionTooLong(AgentEnvsError, ValueError):
    """The action is longer than the environment's ``max_action_chars``."""

    code = "action_too_long"
    http_status = 413


class UnknownTask(AgentEnvsError, KeyError):
    """``options['task_id']`` names no task of the split."""

    code = "unknown_task"
    http_status = 422

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownSplit(AgentEnvsError, ValueError):
    """``options['split']`` names no split of the environment."""

    code = "unknown_split"
    http_status = 422


class UnknownEnv(AgentEnvsError, KeyError):
    """``make(name)`` with a name that is not registered."""

    code = "unknown_env"
    http_status = 422

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidArgument(AgentEnvsError, ValueError):
    """A constructor keyword, reset option or state that the environment does not accept."""

    code = "invalid_argument"
    http_status = 422


class MissingDependency(AgentEnvsError, ImportError):
    """An optional package that the environment needs is not installed."""

    code = "missing_dependency"
    http_status = 500


class PanelIntegrityError(AgentEnvsError, RuntimeError):
    """A frozen task panel does not match the sha256 its manifest records."""

    code = "panel_integrity"
    http_status = 500


class EnvFailed(AgentEnvsError, RuntimeError):
    """The engine behind an environment failed (a dead JVM, a crashed worker)."""

    code = "env_failed"
    http_status = 500


class PredictionConflict(InvalidArgument):
    """A prediction-store write that contradicts what it holds (another payload, another outcome)."""

    code = "prediction_conflict"
    http_status = 409


class UnknownPrediction(InvalidArgument, LookupError):
    """A ``resolution_id`` (or question) the prediction store has never acknowledged."""

    code = "unknown_prediction"
    http_status = 404


ALL_ERRORS: tuple[type[AgentEnvsError], ...] = (
    ResetNeeded,
    EpisodeOver,
    InvalidActionType,
    ActionTooLong,
    UnknownTask,
    UnknownSplit,
    UnknownEnv,
    InvalidArgument,
    MissingDependency,
    PanelIntegrityError,
    EnvFailed,
    PredictionConflict,
    UnknownPrediction,
)
"""Every concrete error, so a server or client can map a ``code`` back to its class."""


def error_for_code(code: str) -> type[AgentEnvsError]:
    """The error class for a wire ``code``; the base class for codes this version does not know."""
    for cls in ALL_ERRORS:
        if cls.code == code:
            return cls
    return AgentEnvsError
