"""The conformance suite passes a correct environment and fails each deliberately broken one."""

from __future__ import annotations

import functools
import random
import re

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


class PathlessEnv(GuessEnv):
    """Declares anchor paths but names none for any task."""

    def anchor_paths(self):
        return None


class Proxy:
    """Forwards reset, step and close to an in-process environment, as a remote client does: no anchor_paths."""

    def __init__(self, cls: type):
        env = cls()
        self.reset, self.step, self.close = env.reset, env.step, env.close


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


PICK_TASKS = tuple({"task_id": f"p{i}", "target": 7 + 9 * i} for i in range(4))


class PickEnv(TextEnv):
    """Pick the hidden number in 0..39, one try: blind play wins once in 40. Honest: only that number wins."""

    name = "pick"
    default_max_turns = 1
    has_admissible_actions = True

    def splits(self) -> dict[str, int]:
        return {"test": len(PICK_TASKS)}

    def tasks(self, split: str):
        return PICK_TASKS

    def _reset(self, task, rng):
        return "Pick a number from 0 to 39.", {"admissible_actions": [str(n) for n in range(40)], "score": 0.0}

    def _step(self, action: str) -> Transition:
        won = self.wins(action)
        info = {"action_valid": action.strip().isdigit(), "score": self.score(action, won), "success": won}
        return Transition("Right!" if won else "Wrong.", float(won), True, info)

    def wins(self, action: str) -> bool:
        return action.strip() == str(self.task["target"])

    def score(self, action: str, won: bool) -> float:
        return float(won)


class AnyListedWinsEnv(PickEnv):
    """Scores an answer list: wins when the number is anywhere in the action."""

    def wins(self, action: str) -> bool:
        return str(self.task["target"]) in re.findall(r"\d+", action)


class FirstIsRightEnv(PickEnv):
    """Every task's number is the first admissible action: position leaks the answer."""

    def wins(self, action: str) -> bool:
        return action.strip() == "0"


class VerboseScoresEnv(PickEnv):
    """Scores the length of the action, whatever it says."""

    def score(self, action: str, won: bool) -> float:
        return min(1.0, len(action) / 100)


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


def test_an_env_with_anchors_and_without_anchor_paths_fails_the_anchor_check():
    class NoPathsEnv(GuessEnv):
        anchor_paths = None

    with pytest.raises(ConformanceError) as caught:
        check_text_env(factory(NoPathsEnv), skip=("cross_process", "fuzz", "reward_integrity"))
    assert "gives anchors but no anchor_paths()" in caught.value.failures["anchor"]


def test_anchor_paths_that_name_no_paths_for_any_checked_seed_fail_the_anchor_check():
    with pytest.raises(ConformanceError) as caught:
        check_text_env(factory(PathlessEnv), skip=("cross_process", "fuzz", "reward_integrity"))
    assert "names no two paths to one state" in caught.value.failures["anchor"]


def test_a_proxy_without_anchor_paths_reports_the_anchor_check_skipped():
    others = tuple(check for check in CHECKS if check != "anchor")
    report = check_text_env(functools.partial(Proxy, GuessEnv), skip=others)
    assert "proxy" in report.skipped["anchor"] and "anchor" not in report.passed


def test_an_honest_pick_passes_the_reward_integrity_check():
    others = tuple(check for check in CHECKS if check != "reward_integrity")
    assert check_text_env(factory(PickEnv), skip=others).passed == ["reward_integrity"]


@pytest.mark.parametrize(
    ("cls", "exploit", "won"),
    [
        (AnyListedWinsEnv, "answer_list", "reached success in 2 of 2 episodes"),
        (FirstIsRightEnv, "repeated", "reached success in 2 of 2 episodes"),
        (VerboseScoresEnv, "very_long", "mean score 1.000, above blind random play's 99% bound"),
    ],
)
def test_an_exploitable_env_fails_the_reward_integrity_check(cls, exploit, won):
    others = tuple(check for check in CHECKS if check != "reward_integrity")
    with pytest.raises(ConformanceError) as caught:
        check_text_env(factory(cls), skip=others)
    assert f"exploit {exploit!r} {won}" in caught.value.failures["reward_integrity"], caught.value.failures


def test_unpicklable_factory_reports_cross_process_skipped():
    report = check_text_env(lambda: GuessEnv(), skip=("fuzz",))
    assert "cross_process" in report.skipped and "fuzz" in report.skipped


def test_unknown_check_name_is_refused():
    with pytest.raises(errors.InvalidArgument):
        check_text_env(factory(GuessEnv), skip=("nonsense",))
