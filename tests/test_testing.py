"""The conformance suite passes a correct environment and fails each deliberately broken one."""

from __future__ import annotations

import functools
import random

import pytest

from agentenvs import errors
from agentenvs.core import TextEnv, Transition
from agentenvs.testing import ConformanceError, check_text_env

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
        return self._observation("Guess 0, 1 or 2."), self._info()

    def _observation(self, text: str) -> str:
        return f"{text} (noise {self.offset})"

    def _info(self, **extra):
        return {"admissible_actions": ["0", "1", "2"], "action_valid": True, **extra}

    def _step(self, action: str) -> Transition:
        if action.strip() not in ("0", "1", "2"):
            return Transition(self._observation("Say 0, 1 or 2."), 0.0, False, self._info(action_valid=False))
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
        return {"offset": self.offset, "observation": self._last_observation, "info": self._last_info}

    def _set_state(self, native):
        self.offset = native["offset"]
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
    assert set(report.passed) == {
        "gymnasium_checker",
        "determinism",
        "cross_process",
        "restore",
        "info_and_termination",
        "misuse",
        "fuzz",
    }


@pytest.mark.parametrize(
    ("cls", "failing_check"),
    [
        (GlobalRandomEnv, "determinism"),
        (HashSeededEnv, "cross_process"),
        (BadInfoEnv, "info_and_termination"),
        (ScoreOutOfRangeEnv, "info_and_termination"),
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


def test_unpicklable_factory_reports_cross_process_skipped():
    report = check_text_env(lambda: GuessEnv(), skip=("fuzz",))
    assert "cross_process" in report.skipped and "fuzz" in report.skipped


def test_unknown_check_name_is_refused():
    with pytest.raises(errors.InvalidArgument):
        check_text_env(factory(GuessEnv), skip=("nonsense",))
