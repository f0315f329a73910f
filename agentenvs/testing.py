"""The conformance suite every environment (in-process or remote) must pass.

``check_text_env(factory)`` builds environments with ``factory`` and checks the contract of
docs/contract.md: gymnasium's own checker, determinism (also across processes with different hash
seeds), restore by ``set_state``, the info vocabulary (``score`` on every step), the meaning of
``anchor`` (one state, one anchor, whatever the path), terminated/truncated semantics, the documented
error for every misuse, a fuzz of random and hostile actions that must never raise anything else,
and reward integrity (no generic exploit wins more than blind random play: ``agentenvs.integrity``).
It runs every check, then raises one :class:`ConformanceError` that lists every failure.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import pickle
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentenvs import errors
from agentenvs.info import check_info
from agentenvs.integrity import RewardIntegrityError, run_integrity
from agentenvs.seeding import derive_seed

Policy = Callable[[str, dict, np.random.Generator], str]
EnvFactory = Callable[[], Any]

FALLBACK_ACTIONS = ("look", "help", "inventory", "pull[0]", "pull[1]", "pull[2]", "", "go north", "wait")

HOSTILE_ACTIONS = (
    "",
    " ",
    "\x00",
    "\n" * 500,
    "\t\r\n\x0b\x0c",
    "\x1b[31mred\x1b[0m",
    "\u202egnp.exe",
    "ÿ😀 café 中文",
    "\ud800",
    "<action></action>",
    "<action>" * 50,
    "'; rm -rf / #",
    "$(reboot)",
    "../../../etc/passwd",
    "%s%n%x",
    "{{7*7}}",
    '{"action": null}',
    "pull[99999999999999999999999]",
    "pull[-1]",
    "take " * 200,
)


class ConformanceError(AssertionError):
    """The environment broke the contract; ``failures`` maps each failed check to what went wrong."""

    def __init__(self, failures: dict[str, str]):
        self.failures = failures
        lines = [f"{len(failures)} conformance check(s) failed:"]
        lines += [f"- {name}: {message}" for name, message in failures.items()]
        super().__init__("\n".join(lines))


@dataclass
class ConformanceReport:
    passed: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def default_policy(observation: str, info: dict, rng: np.random.Generator) -> str:
    """An admissible action when the environment lists them, else one of a few common commands."""
    choices = info.get("admissible_actions") or FALLBACK_ACTIONS
    return choices[int(rng.integers(len(choices)))]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=True)


def run_transcript(
    env: Any, seed: int, policy: Policy = default_policy, max_steps: int = 40, options: dict | None = None
) -> list[Any]:
    """Play one episode with a seeded policy; the list of everything the environment returned."""
    rng = np.random.default_rng(derive_seed("conformance-policy", seed))
    observation, info = env.reset(seed=seed, options=options)
    transcript: list[Any] = [["reset", observation, info]]
    for _ in range(max_steps):
        action = policy(observation, info, rng)
        observation, reward, terminated, truncated, info = env.step(action)
        transcript.append([action, observation, reward, terminated, truncated, info])
        if terminated or truncated:
            break
    return transcript


def _transcript_in_subprocess(
    factory: EnvFactory, seeds: tuple[int, ...], policy: Policy, max_steps: int, queue: Any
) -> None:
    try:
        env = factory()
        try:
            queue.put(("ok", [_canonical(run_transcript(env, s, policy, max_steps)) for s in seeds]))
        finally:
            env.close()
    except BaseException:
        queue.put(("error", traceback.format_exc()))


class _Checker:
    def __init__(
        self,
        factory: EnvFactory,
        seeds: tuple[int, ...],
        policy: Policy,
        max_steps: int,
        fuzz_examples: int,
        integrity_repeats: int,
    ):
        self.factory = factory
        self.seeds = seeds
        self.policy = policy
        self.max_steps = max_steps
        self.fuzz_examples = fuzz_examples
        self.integrity_repeats = integrity_repeats
        self.report = ConformanceReport()
        self._envs: list[Any] = []

    def env(self) -> Any:
        env = self.factory()
        self._envs.append(env)
        return env

    def close_all(self) -> None:
        for env in self._envs:
            with contextlib.suppress(Exception):
                env.close()
        self._envs.clear()

    def run(self, name: str, check: Callable[[], str | None]) -> None:
        try:
            skipped = check()
        except AssertionError as exc:
            self.report.failures[name] = str(exc) or "assertion failed"
        except Exception as exc:
            self.report.failures[name] = f"raised {type(exc).__name__}: {exc}"
        else:
            if skipped:
                self.report.skipped[name] = skipped
            else:
                self.report.passed.append(name)
        finally:
            self.close_all()

    def transcript(self, env: Any, seed: int, options: dict | None = None) -> list[Any]:
        return run_transcript(env, seed, self.policy, self.max_steps, options)

    # ------------------------------------------------------------------ checks

    def gymnasium_checker(self) -> None:
        from gymnasium.utils.env_checker import check_env

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_env(self.env(), skip_render_check=True, skip_close_check=False)

    def determinism(self) -> None:
        for seed in self.seeds:
            first = _canonical(self.transcript(self.env(), seed))
            second = _canonical(self.transcript(self.env(), seed))
            assert first == second, f"two fresh environments gave different episodes for seed {seed}"
            reused = self.env()
            self.transcript(reused, seed + 1000)
            again = _canonical(self.transcript(reused, seed))
            assert first == again, f"reset(seed={seed}) after another episode gave a different episode"

    def cross_process(self) -> str | None:
        for what, value in (("factory", self.factory), ("policy", self.policy)):
            try:
                pickle.dumps(value)
            except Exception as exc:
                return f"the {what} cannot be pickled ({type(exc).__name__}), so no second process can use it"
        expected = [_canonical(self.transcript(self.env(), s)) for s in self.seeds]
        context = multiprocessing.get_context("spawn")
        previous = os.environ.get("PYTHONHASHSEED")
        try:
            for hash_seed in ("1", "2"):
                os.environ["PYTHONHASHSEED"] = hash_seed
                queue = context.Queue()
                process = context.Process(
                    target=_transcript_in_subprocess,
                    args=(self.factory, self.seeds, self.policy, self.max_steps, queue),
                )
                process.start()
                try:
                    status, payload = queue.get(timeout=300)
                finally:
                    process.join(timeout=60)
                    if process.is_alive():
                        process.kill()
                assert status == "ok", f"the environment failed in a second process:\n{payload}"
                for seed, mine, theirs in zip(self.seeds, expected, payload, strict=True):
                    assert mine == theirs, (
                        f"seed {seed} gave a different episode in a process with PYTHONHASHSEED={hash_seed}: "
                        "is something seeded from hash(), the clock or global random state?"
                    )
        finally:
            if previous is None:
                os.environ.pop("PYTHONHASHSEED", None)
            else:
                os.environ["PYTHONHASHSEED"] = previous
        return None

    def restore(self) -> None:
        for seed in self.seeds:
            env = self.env()
            full = self.transcript(env, seed)
            cut = (len(full) - 1) // 2
            replica = self.env()
            replica.reset(seed=seed)
            for entry in full[1 : cut + 1]:
                replica.step(entry[0])
            state = replica.get_state()
            json.dumps(state)
            restored = self.env()
            observation, info = restored.set_state(json.loads(json.dumps(state)))
            at_cut = full[cut]
            expected = [at_cut[1], at_cut[2]] if cut == 0 else [at_cut[1], at_cut[5]]
            assert _canonical([observation, info]) == _canonical(expected), (
                f"set_state after {cut} steps (seed {seed}) did not give back the observation and info of that step"
            )
            for entry in full[cut + 1 :]:
                got = restored.step(entry[0])
                assert _canonical(list(got)) == _canonical(entry[1:]), (
                    f"after set_state, step {entry[0]!r} (seed {seed}) differs from the original episode"
                )
            assert _canonical(restored.get_state()) == _canonical(env.get_state()), (
                "get_state after the restored episode differs from the original's"
            )

    def info_and_termination(self) -> None:
        for seed in self.seeds:
            transcript = self.transcript(self.env(), seed)
            reset_info = transcript[0][2]
            self._check_common_info(reset_info, 0, "reset")
            for key in ("success", "end_reason"):
                assert key not in reset_info, f"reset info has {key!r}, which belongs only to the final step"
            max_turns = reset_info["max_turns"]
            for index, (action, observation, reward, terminated, truncated, info) in enumerate(transcript[1:], 1):
                where = f"step {index} (seed {seed}, action {action!r})"
                self._check_common_info(info, index, where)
                assert isinstance(observation, str), f"{where}: observation is {type(observation).__name__}"
                assert isinstance(reward, float) and math.isfinite(reward), f"{where}: reward {reward!r}"
                assert isinstance(terminated, bool) and isinstance(truncated, bool), f"{where}: flags are not bools"
                assert not (terminated and truncated), f"{where}: terminated and truncated are both True"
                assert isinstance(info.get("action_valid"), bool), f"{where}: info['action_valid'] missing"
                ended = terminated or truncated
                for key in ("success", "end_reason"):
                    assert (key in info) == ended, f"{where}: {key!r} must be in info exactly at the episode end"
                if truncated:
                    assert info["turn"] == max_turns, f"{where}: truncated before max_turns ({max_turns})"
                    assert info["end_reason"] == "max_turns", (
                        f"{where}: truncated but end_reason {info['end_reason']!r}"
                    )
                if terminated:
                    expected = ("success",) if info["success"] else ("failure", "error")
                    assert info["end_reason"] in expected, (
                        f"{where}: success={info['success']} but end_reason {info['end_reason']!r}"
                    )
                if not ended:
                    assert info["turn"] < max_turns, f"{where}: not truncated at turn {info['turn']} = max_turns"

    def _check_common_info(self, info: dict, turn: int, where: str) -> None:
        assert isinstance(info, dict), f"{where}: info is {type(info).__name__}"
        problems = check_info(info)
        assert not problems, f"{where}: " + "; ".join(problems)
        for key in ("task_id", "split", "turn", "max_turns", "score"):
            assert key in info, f"{where}: info lacks {key!r}"
        assert info["turn"] == turn, f"{where}: info['turn'] is {info['turn']}, expected {turn}"
        json.dumps(info)

    def anchor(self) -> str | None:
        """Two paths to one state end with one anchor, which differs from the reset's and from the
        anchors of the different states the paths pass through after their first actions. An
        in-process environment that gives anchors must name such paths (``anchor_paths()``) for at
        least one checked seed; a proxy of one (remote, Ray) cannot, and reports the check skipped."""
        env = self.env()
        _, info = env.reset(seed=self.seeds[0])
        if "anchor" not in info:
            return "the environment gives no anchor"
        declare = getattr(env, "anchor_paths", None)
        if declare is None:
            # here, not at the top: agentenvs.core imports gymnasium, whose registration hook loads
            # environment packages, which import agentenvs.core and this module
            from agentenvs.core import TextEnv

            if not isinstance(env, TextEnv):
                return f"{type(env).__name__} is a proxy without anchor_paths(); check its class in process"
            raise AssertionError(
                f"{type(env).__name__} gives anchors but no anchor_paths(), so nothing checks that they name the "
                "state: add anchor_paths() (docs/contract.md, the anchor check)"
            )
        checked = [seed for seed in self.seeds if self._check_anchor_paths(env, seed, declare)]
        assert checked, (
            f"anchor_paths() names no two paths to one state in the tasks of seeds {list(self.seeds)}, so their "
            "anchors go unchecked: name paths for more tasks, or check seeds whose tasks have some"
        )
        return None

    def _check_anchor_paths(self, env: Any, seed: int, declare: Callable[[], Any]) -> bool:
        """Check the paths ``anchor_paths()`` names after ``reset(seed)``; False when it names none."""
        _, info = env.reset(seed=seed)
        paths = declare()
        if paths is None:
            return False
        first, second = (list(path) for path in paths)
        assert first and second and first != second, f"anchor_paths() gave {first} and {second}"
        walks = [self._anchors_along(env, seed, path) for path in (first, second)]
        assert walks[0][-1] == walks[1][-1], (
            f"seed {seed}: {first} and {second} reach one state but end with anchors {walks[0][-1]} and {walks[1][-1]}"
        )
        assert walks[0][-1] != info["anchor"], (
            f"seed {seed}: the state after {first} differs from the state at reset but has the same anchor"
        )
        assert walks[0][0] != walks[1][0], (
            f"seed {seed}: {first[0]!r} and {second[0]!r} lead to different states but give the same anchor"
        )
        return True

    def _anchors_along(self, env: Any, seed: int, path: list[str]) -> list[str]:
        env.reset(seed=seed)
        anchors = []
        for index, action in enumerate(path, 1):
            _, _, terminated, truncated, info = env.step(action)
            anchors.append(info["anchor"])
            assert index == len(path) or not (terminated or truncated), (
                f"seed {seed}: the episode ended at {action!r}, before the end of anchor path {path}"
            )
        return anchors

    def reward_integrity(self) -> None:
        """No generic exploit (``agentenvs.integrity.EXPLOITS``) wins more than blind random play."""
        report = run_integrity(self.env(), self.seeds, repeats=self.integrity_repeats)
        if report.wins:
            raise RewardIntegrityError(report.wins)

    def misuse(self) -> None:
        env = self.env()
        self._expect(errors.ResetNeeded, "step before reset", env.step, "look")
        description = env.describe()
        env.reset(seed=self.seeds[0])
        for bad in (123, None, b"look", ["look"]):
            self._expect(errors.InvalidActionType, f"step({bad!r})", env.step, bad)
        limit = description["max_action_chars"]
        self._expect(errors.ActionTooLong, f"an action of {limit + 1} characters", env.step, "x" * (limit + 1))
        self._expect(errors.UnknownSplit, "an unknown split", env.reset, seed=0, options={"split": "no-such-split"})
        self._expect(errors.UnknownTask, "an unknown task id", env.reset, seed=0, options={"task_id": "no-such-task"})
        self._expect(errors.InvalidArgument, "an unknown reset option", env.reset, seed=0, options={"colour": "red"})
        for seed in (-1, "7", 1.5):
            self._expect(errors.InvalidArgument, f"reset(seed={seed!r})", env.reset, seed=seed)
        self._expect(errors.InvalidArgument, "set_state of a non-state", env.set_state, {"not": "a state"})
        transcript = self.transcript(env, self.seeds[0])
        last = transcript[-1]
        if len(transcript) > 1 and (last[3] or last[4]):
            self._expect(errors.EpisodeOver, "step after the episode ended", env.step, "look")
        observation, info = env.reset(seed=self.seeds[0])
        assert isinstance(observation, str) and info["turn"] == 0, "the environment is unusable after misuse errors"
        env.step(self.policy(observation, info, np.random.default_rng(0)))

    def _expect(self, error: type[Exception], what: str, call: Callable, *args: Any, **kwargs: Any) -> None:
        try:
            call(*args, **kwargs)
        except error:
            return
        except Exception as exc:
            raise AssertionError(f"{what} raised {type(exc).__name__}: {exc}, expected {error.__name__}") from None
        raise AssertionError(f"{what} raised nothing, expected {error.__name__}")

    def fuzz(self) -> None:
        try:
            from hypothesis import HealthCheck, given, settings
            from hypothesis import strategies as st
        except ImportError as exc:
            raise errors.MissingDependency("the fuzz check needs hypothesis: pip install 'agentenvs[dev]'") from exc
        env = self.env()
        limit = env.describe()["max_action_chars"]
        state = {"done": True}

        def step_once(action: str) -> None:
            if state["done"]:
                env.reset(seed=self.seeds[0])
                state["done"] = False
            try:
                observation, reward, terminated, truncated, info = env.step(action)
            except errors.ActionTooLong:
                assert len(action) > limit, f"ActionTooLong for an action of {len(action)} <= {limit} characters"
                return
            assert len(action) <= limit, f"an action of {len(action)} > {limit} characters was accepted"
            assert env.observation_space.contains(observation), (
                f"action {action[:60]!r} gave an observation outside the observation space "
                "(non-printable or non-ASCII characters? escape echoed input with agentenvs.core.ascii_safe)"
            )
            assert isinstance(reward, float) and math.isfinite(reward), f"reward {reward!r}"
            problems = check_info(info)
            assert not problems, "; ".join(problems)
            assert info.get("action_valid") in (True, False), "info['action_valid'] missing"
            state["done"] = terminated or truncated

        for action in (*HOSTILE_ACTIONS, "a" * limit, "a" * (limit + 1)):
            step_once(action)

        @settings(
            max_examples=self.fuzz_examples,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.text(max_size=300) | st.sampled_from(FALLBACK_ACTIONS))
        def random_actions(action: str) -> None:
            step_once(action)

        random_actions()


CHECKS = (
    "gymnasium_checker",
    "determinism",
    "cross_process",
    "restore",
    "info_and_termination",
    "anchor",
    "reward_integrity",
    "misuse",
    "fuzz",
)


def check_text_env(
    factory: EnvFactory,
    *,
    seeds: tuple[int, ...] = (0, 1),
    policy: Policy = default_policy,
    max_steps: int = 40,
    fuzz_examples: int = 60,
    integrity_repeats: int = 2,
    skip: tuple[str, ...] = (),
) -> ConformanceReport:
    """Check the contract on environments built by ``factory``; raise :class:`ConformanceError` on failure.

    ``factory`` must be picklable (``functools.partial(agentenvs.make, "bandit")``) for the
    cross-process check; a lambda makes that check report itself skipped. ``policy`` chooses the
    actions of the checked episodes; ``max_steps`` caps their length. The anchor check plays the two
    paths the environment's ``anchor_paths()`` names after a reset; an environment with anchors and
    without it fails, a proxy of one (a remote environment) reports the check skipped. The reward
    integrity check (``agentenvs.integrity``) plays every generic exploit to the turn limit on the
    tasks of ``seeds`` and blind random play ``integrity_repeats`` times on each.
    """
    unknown = set(skip) - set(CHECKS)
    if unknown:
        raise errors.InvalidArgument(f"unknown checks to skip {sorted(unknown)}; the checks are {CHECKS}")
    checker = _Checker(factory, tuple(seeds), policy, max_steps, fuzz_examples, integrity_repeats)
    for name in CHECKS:
        if name in skip:
            checker.report.skipped[name] = "skipped by the caller"
        else:
            checker.run(name, getattr(checker, name))
    if checker.report.failures:
        raise ConformanceError(checker.report.failures)
    return checker.report
