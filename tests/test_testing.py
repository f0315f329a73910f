"""The conformance suite passes a correct environment and fails each deliberately broken one."""

from __future__ import annotations

import functools
import random

import pytest

from agentenvs import errors
from agentenvs.core import TextEnv, Transition
from agentenvs.info import text_hash
from agentenvs.testing import CHECKS, ConformanceError, check_text_env

TASKS = tuple({"task_id": f"t{i}", "target": i % 3} for i in range(4))


class GuessEnv(TextEnv):
    """Guess a number in 0..2; three guesses. Correct and small, the reference for the broken ones."""

    name = "guess"
    default_max_turns = 3
    has_admissible_actions = True

    def splits(self) -> dict[str, int]:
        return {"test": len(TASKS)}

    def tasks(self, split: str):
        return TASKS

    def _reset(self, task, rng):
        self.offset = int(rng.integers(0, 100))
        self.guesses: list[str] = []
        return self._observation("Guess 0, 1 or 2."), self._info()

    def _observation(self, text: str) -> str:
        return f"{text} (noise {self.offset})"

    def _info(self, score: float = 0.0, **extra):
        info = {"admissible_actions": ["0", "1", "2"], "action_valid": True, "score": score, **extra}
        return {**info, "anchor": self.anchor()}

    def anchor(self) -> str:
        """The state is the task and the set of numbers guessed, in whatever order."""
        return text_hash(f"{self.task['task_id']}:{sorted(set(self.guesses))}")

    def anchor_paths(self):
        wrong = [g for g in ("0", "1", "2") if int(g) != self.task["target"]]
        return [wrong[0], wrong[1]], [wrong[1], wrong[0]]

    def _step(self, action: str) -> Transition:
        if action.strip() not in ("0", "1", "2"):
            return Transition(self._observation("Say 0, 1 or 2."), 0.0, False, self._info(action_valid=False))
        self.guesses.append(action.strip())
        won = int(action) == self.task["target"]
        info = self._info(success=won, score=float(won))
        return Transition(self._observation("Right!" if won else "Wrong."), float(won), won, info)


class GlobalRandomEnv(GuessEnv):
    def _reset(self, task, rng):
        self.offset = random.randrange(1_000_000)
        return self._observation("Guess."), self._info()


class HashSeededEnv(GuessEnv):
    def _reset(self, task, rng):
        self.offset = hash(task["task_id"]) % 1000
        return self._observation("Guess."), self._info()


class BadInfoEnv(GuessEnv):
    def _step(self, action):
        transition = super()._step(action)
        transition.info["won"] = 1
        return transition


class ScoreOutOfRangeEnv(GuessEnv):
    def _step(self, action):
        transition = super()._step(action)
        transition.info["score"] = 100.0
        return transition


class ScoreAtTheEndOnlyEnv(GuessEnv):
    def _step(self, action):
        transition = super()._step(action)
        if not transition.terminated:
            del transition.info["score"]
        return transition


class PathAnchorEnv(GuessEnv):
    """Its anchor hashes the guesses in order: one state reached by two paths gets two anchors."""

    def anchor(self) -> str:
        return text_hash(f"{self.task['task_id']}:{self.guesses}")


class ConstantAnchorEnv(GuessEnv):
    """One anchor for every state of a task."""

    def anchor(self) -> str:
        return text_hash(self.task["task_id"])


class UnknownPrivilegedEnv(GuessEnv):
    """Names its privileged answer with a key of its own instead of the vocabulary's."""

    has_privileged = True

    def _info(self, score: float = 0.0, **extra):
        return {**super()._info(score, **extra), "privileged": {"answer": self.task["target"]}}


class UnicodeObservationEnv(GuessEnv):
    def _step(self, action):
        transition = super()._step(action)
        return Transition(f"You said {action}", transition.reward, transition.terminated, transition.info)


class CrashesOnGarbageEnv(GuessEnv):
    def _step(self, action):
        return super()._step(str(int(action.strip() or "x")))


class NoGuardEnv(GuessEnv):
    def step(self, action):
        if self._task is None:
            return "nothing", 0.0, False, False, {"task_id": "t0", "split": "test", "turn": 0, "max_turns": 3}
        return super().step(action)


class BothFlagsEnv(GuessEnv):
    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, reward, terminated, terminated or truncated, info


class NativeStateEnv(GuessEnv):
    """Restores from its own snapshot instead of replaying."""

    has_native_state = True

    def _get_state(self):
        observation, info = self._last_observation, self._last_info
        return {"offset": self.offset, "guesses": self.guesses, "observation": observation, "info": info}

    def _set_state(self, native):
        self.offset, self.guesses = native["offset"], list(native["guesses"])
        return native["observation"], native["info"]

    def _reset(self, task, rng):
        observation, info = super()._reset(task, rng)
        self._last_info = info
        return observation, info

    def _step(self, action):
        transition = super()._step(action)
        self._last_info = transition.info
        return transition


class WrongSnapshotEnv(NativeStateEnv):
    """Its snapshot restores the wrong noise, so the restored episode drifts from the original."""

    def _set_state(self, native):
        observation, info = super()._set_state(native)
        self.offset += 1
        return observation, info


def factory(cls: type) -> functools.partial:
    return functools.partial(cls)


@pytest.mark.parametrize("cls", [GuessEnv, NativeStateEnv])
def test_correct_env_passes_every_check(cls):
    report = check_text_env(factory(cls))
    assert not report.failures and not report.skipped
    assert set(report.passed) == set(CHECKS)


@pytest.mark.parametrize(
    ("cls", "failing_check"),
    [
        (GlobalRandomEnv, "determinism"),
        (HashSeededEnv, "cross_process"),
        (BadInfoEnv, "info_and_termination"),
        (ScoreOutOfRangeEnv, "info_and_termination"),
        (ScoreAtTheEndOnlyEnv, "info_and_termination"),
        (PathAnchorEnv, "anchor"),
        (ConstantAnchorEnv, "anchor"),
        (UnicodeObservationEnv, "fuzz"),
        (CrashesOnGarbageEnv, "fuzz"),
        (NoGuardEnv, "misuse"),
        (BothFlagsEnv, "info_and_termination"),
        (WrongSnapshotEnv, "restore"),
    ],
)
def test_broken_env_fails(cls, failing_check):
    skip = () if failing_check == "cross_process" else ("cross_process",)  # spawning is slow; run it where aimed
    with pytest.raises(ConformanceError) as caught:
        check_text_env(factory(cls), fuzz_examples=20, skip=skip)
    assert failing_check in caught.value.failures, caught.value.failures


def test_an_unknown_privileged_key_fails_the_info_check():
    with pytest.raises(ConformanceError) as caught:
        check_text_env(
            functools.partial(UnknownPrivilegedEnv, privileged=True), fuzz_examples=5, skip=("cross_process",)
        )
    assert "unknown privileged key 'answer'" in caught.value.failures["info_and_termination"]


def test_an_env_without_anchor_paths_reports_the_anchor_check_skipped():
    class NoPathsEnv(GuessEnv):
        anchor_paths = None

    report = check_text_env(lambda: NoPathsEnv(), skip=("fuzz",))
    assert "anchor_paths" in report.skipped["anchor"] and "anchor" not in report.passed


def test_unpicklable_factory_reports_cross_process_skipped():
    report = check_text_env(lambda: GuessEnv(), skip=("fuzz",))
    assert "cross_process" in report.skipped and "fuzz" in report.skipped


def test_unknown_check_name_is_refused():
    with pytest.raises(errors.InvalidArgument):
        check_text_env(factory(GuessEnv), skip=("nonsense",))
