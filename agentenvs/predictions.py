"""The prediction store: forecasts whose reward exists only once their question resolves (docs/forecast.md).

One SQLite file in WAL mode, shared by server workers, resolvers and trainers in several processes.
The episode store (``rollout/store.py``) makes each record durable before ``append`` returns; this store
keeps that promise with ``synchronous=FULL``: a call that returned was fsynced, so a ``kill -9`` (or a
power cut) loses nothing acknowledged. Each state change is one ``BEGIN IMMEDIATE`` transaction, so
concurrent writers queue on the write lock (``busy_timeout`` plus a bounded retry) instead of failing.

A prediction moves ``pending -> resolved`` or ``pending -> voided`` exactly once: the update is
conditional on ``state='pending'``. Writes are idempotent by ``resolution_id``: the same payload again is
a no-op, a different payload under a used id is :class:`PredictionConflict`.
"""

from __future__ import annotations

import itertools
import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenvs.errors import InvalidArgument, PredictionConflict, UnknownPrediction
from agentenvs.forecast_scores import CHOICE_TOLERANCE, check_rules, level_text, quantile_levels, score_forecast

SCHEMA = """
CREATE TABLE IF NOT EXISTS predictions (
    resolution_id TEXT PRIMARY KEY,
    question_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    forecast TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'resolved', 'voided')),
    created_at REAL NOT NULL,
    outcome TEXT,
    scores TEXT,
    resolved_at REAL,
    created_tick INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS predictions_question ON predictions (question_id, state);
CREATE INDEX IF NOT EXISTS predictions_resolved ON predictions (state, resolved_at, resolution_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""
KINDS = ("binary", "choice", "numeric")
__all__ = ["PredictionConflict", "PredictionStore", "UnknownPrediction", "check_forecast", "check_outcome"]
BUSY_TIMEOUT_MS = 30_000
RETRIES = 20


@dataclass(frozen=True)
class Prediction:
    """One stored prediction; ``outcome``, ``scores`` and ``resolved_at`` are set once it resolved."""

    resolution_id: str
    question_id: str
    kind: str
    forecast: Any
    payload: dict[str, Any]
    state: str
    created_at: float
    outcome: Any = None
    scores: dict[str, float] | None = None
    resolved_at: float | None = None
    created_tick: int = 0


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def check_forecast(kind: str, forecast: Any, rules: Mapping[str, Any] | None = None) -> Any:
    """The forecast in its canonical form, or :class:`InvalidArgument` that says what is expected.

    ``rules`` is the question (or a prediction's payload). binary: a probability in [0, 1]; choice:
    ``{option: probability}`` for exactly the question's ``options``, each in [0, 1], summing to 1 within
    ``CHOICE_TOLERANCE``, returned normalised to sum to 1; numeric: ``{level: value}`` at exactly the
    question's quantile levels (``quantiles``, default 0.1, 0.5, 0.9), finite values that do not decrease as
    the level rises, returned in level order. Every refusal is one that would otherwise let a forecast score
    outside what its probabilities or quantiles claim (docs/forecast.md, "Scores").
    """
    rules = rules or {}
    if kind == "binary":
        return _probability(forecast, "a binary forecast")
    if kind == "choice":
        return _choice(forecast, rules.get("options"))
    if kind == "numeric":
        return _quantiles(forecast, quantile_levels(rules))
    raise InvalidArgument(f"unknown question kind {kind!r}; one of {KINDS}")


def _choice(forecast: Any, options: list[str] | None) -> dict[str, float]:
    if not isinstance(forecast, dict) or not forecast:
        raise InvalidArgument('a choice forecast is a JSON object {"option": probability, ...}')
    probs = {str(k): _probability(v, f"the probability of {k!r}") for k, v in forecast.items()}
    if options is not None:
        if set(probs) != set(options):
            raise InvalidArgument(f"a choice forecast gives one probability to each option, no other: {options}")
        probs = {option: probs[option] for option in options}
    total = math.fsum(probs.values())  # exactly rounded: the same whatever order the options came in
    if abs(total - 1.0) > CHOICE_TOLERANCE:
        raise InvalidArgument(f"a choice forecast must sum to 1 (within {CHOICE_TOLERANCE}), got {total:.6f}")
    return {option: p / total for option, p in probs.items()}


def _quantiles(forecast: Any, levels: tuple[float, ...]) -> dict[str, float]:
    wanted = ", ".join(level_text(level) for level in levels)
    if not isinstance(forecast, dict) or not forecast:
        raise InvalidArgument(f"a numeric forecast is quantiles at the levels {wanted}: {{level: value, ...}}")
    given: dict[float, float] = {}
    for key, value in forecast.items():
        level = _level(key)
        if level in given:
            raise InvalidArgument(f"quantile level {level_text(level)} is given twice")
        given[level] = _finite(value, f"the {level_text(level)} quantile")
    if set(given) != set(levels):
        got = ", ".join(level_text(level) for level in sorted(given))
        raise InvalidArgument(f"a numeric forecast gives its quantiles at exactly the levels {wanted}, got {got}")
    values = [given[level] for level in levels]
    if any(b < a for a, b in itertools.pairwise(values)):
        raise InvalidArgument("numeric quantile values must not decrease as the level rises")
    return {level_text(level): given[level] for level in levels}


def check_outcome(kind: str, outcome: Any, options: list[str] | None = None) -> Any:
    """The outcome in canonical form: binary 0/1 (or true/false), choice an option, numeric a finite number."""
    if kind == "binary":
        if isinstance(outcome, bool) or outcome in (0, 1):
            return int(outcome)
        raise InvalidArgument(f"a binary outcome is 0 or 1 (or true/false), got {outcome!r}")
    if kind == "choice":
        if not isinstance(outcome, str) or (options is not None and outcome not in options):
            raise InvalidArgument(f"a choice outcome is one of the options {options}, got {outcome!r}")
        return outcome
    if kind == "numeric":
        return _finite(outcome, "a numeric outcome")
    raise InvalidArgument(f"unknown question kind {kind!r}; one of {KINDS}")


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{what} must be a finite number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        number = math.inf
    if not math.isfinite(number):
        raise InvalidArgument(f"{what} must be a finite number, got {str(value)[:40]}")
    return number


def _probability(value: Any, what: str) -> float:
    number = _finite(value, what)
    if not 0.0 <= number <= 1.0:
        raise InvalidArgument(f"{what} must be a probability in [0, 1], got {number!r}")
    return number


def _level(key: Any) -> float:
    try:
        level = float(key)
    except (TypeError, ValueError):
        raise InvalidArgument(f"quantile level {key!r} is not a number") from None
    if not 0.0 < level < 1.0:
        raise InvalidArgument(f"quantile level {key!r} must lie in (0, 1)")
    return level


class PredictionStore:
    """Pending and resolved predictions in one SQLite file; safe across threads and processes.

    Each thread gets its own connection (SQLite connections must not be shared across threads).
    """

    def __init__(self, path: str | Path, *, synchronous: str = "FULL"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.synchronous = synchronous
        self._local = threading.local()
        with self._write() as conn:
            for statement in filter(str.strip, SCHEMA.split(";")):
                conn.execute(statement)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (WAL, ``synchronous`` as configured, a 30 s busy timeout)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            _retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __enter__(self) -> PredictionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self) -> _Transaction:
        return _Transaction(self.connection())

    # ------------------------------------------------------------------ writes

    def add(
        self,
        resolution_id: str,
        question_id: str,
        kind: str,
        forecast: Any,
        payload: dict[str, Any] | None = None,
        *,
        now: float | None = None,
    ) -> bool:
        """Store a pending prediction; True when new, False when this exact prediction was stored before."""
        if not isinstance(resolution_id, str) or not resolution_id:
            raise InvalidArgument("resolution_id must be a non-empty string")
        check_rules(kind, payload or {})
        forecast = _canonical(check_forecast(kind, forecast, payload))
        try:
            body = _canonical(payload or {})
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"the payload must be JSON without NaN or infinity: {exc}") from None
        with self._write() as conn:
            row = conn.execute(
                "SELECT question_id, kind, forecast, payload FROM predictions WHERE resolution_id=?", (resolution_id,)
            ).fetchone()
            if row is not None:
                if row != (question_id, kind, forecast, body):
                    raise PredictionConflict(
                        f"resolution_id {resolution_id!r} is stored with another prediction; ids are unique per "
                        "prediction (same id, same payload is a no-op)"
                    )
                return False
            tick = conn.execute("SELECT value FROM meta WHERE key='clock'").fetchone()
            conn.execute(
                "INSERT INTO predictions (resolution_id, question_id, kind, forecast, payload, created_at, "
                "created_tick) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    resolution_id,
                    question_id,
                    kind,
                    forecast,
                    body,
                    time.time() if now is None else now,
                    tick[0] if tick else 0,
                ),
            )
        return True

    def resolve(self, resolution_id: str, outcome: Any, *, now: float | None = None) -> bool:
        """Resolve one pending prediction with its outcome; the scores are computed from the stored forecast.

        True when this call resolved it, False when it already held this outcome (idempotent). Another
        outcome, an outcome of the wrong type, a voided or an unknown id: an error, and nothing changes.
        """
        with self._write() as conn:
            row = conn.execute(
                "SELECT kind, forecast, payload, state, outcome FROM predictions WHERE resolution_id=?",
                (resolution_id,),
            ).fetchone()
            if row is None:
                raise UnknownPrediction(
                    f"no prediction {resolution_id!r} in {self.path}; resolve by the resolution_id the episode gave"
                )
            kind, forecast, payload = row[0], json.loads(row[1]), json.loads(row[2])
            value = check_outcome(kind, outcome, payload.get("options"))
            outcome_text = _canonical(value)
            if row[3] != "pending":
                return _already(resolution_id, (row[3], row[4]), outcome_text)
            try:  # a prediction stored before the scoring rules it now lacks (a store from an older version)
                check_rules(kind, payload)
                forecast = check_forecast(kind, forecast, payload)
            except InvalidArgument as exc:
                raise InvalidArgument(
                    f"prediction {resolution_id!r} cannot be scored under the current rules ({exc}); void it"
                ) from None
            scores = score_forecast(kind, forecast, value, payload)
            conn.execute(
                "UPDATE predictions SET state='resolved', outcome=?, scores=?, resolved_at=? "
                "WHERE resolution_id=? AND state='pending'",
                (outcome_text, _canonical(scores), time.time() if now is None else now, resolution_id),
            )
        return True

    def resolve_question(self, question_id: str, outcome: Any) -> int:
        """Apply a real outcome to every pending prediction of ``question_id``; how many this call resolved."""
        pending = self.pending(question_id)
        if not pending:
            raise UnknownPrediction(f"no pending prediction of question {question_id!r} in {self.path}")
        check_outcome(pending[0].kind, outcome, pending[0].payload.get("options"))
        return sum(self.resolve(p.resolution_id, outcome) for p in pending)

    def void(self, resolution_id: str, reason: str = "", *, now: float | None = None) -> bool:
        """Void a pending prediction (its question was annulled); True when this call voided it."""
        with self._write() as conn:
            changed = conn.execute(
                "UPDATE predictions SET state='voided', outcome=?, resolved_at=? WHERE resolution_id=? "
                "AND state='pending'",
                (_canonical({"void": reason}), time.time() if now is None else now, resolution_id),
            ).rowcount
            if changed:
                return True
            row = conn.execute("SELECT state FROM predictions WHERE resolution_id=?", (resolution_id,)).fetchone()
        if row is None:
            raise UnknownPrediction(f"no prediction {resolution_id!r} in {self.path}")
        if row[0] == "voided":
            return False
        raise PredictionConflict(f"prediction {resolution_id!r} is already resolved; it cannot be voided")

    def advance_clock(self, ticks: int) -> int:
        """Move the simulated clock forward by ``ticks`` (atomically, whoever else advances it); the new tick."""
        if isinstance(ticks, bool) or not isinstance(ticks, int) or ticks < 0:
            raise InvalidArgument(f"ticks must be a non-negative integer, got {ticks!r}")
        with self._write() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('clock', ?) ON CONFLICT(key) DO UPDATE SET value = value + ?",
                (ticks, ticks),
            )
            return int(conn.execute("SELECT value FROM meta WHERE key='clock'").fetchone()[0])

    def clock(self) -> int:
        """The simulated clock's tick (0 until first advanced)."""
        row = self.connection().execute("SELECT value FROM meta WHERE key='clock'").fetchone()
        return 0 if row is None else int(row[0])

    # ------------------------------------------------------------------ reads

    def get(self, resolution_id: str) -> Prediction:
        row = self.connection().execute("SELECT * FROM predictions WHERE resolution_id=?", (resolution_id,)).fetchone()
        if row is None:
            raise UnknownPrediction(f"no prediction {resolution_id!r} in {self.path}")
        return _prediction(row)

    def pending(self, question_id: str | None = None) -> list[Prediction]:
        """The pending predictions (of one question, or all)."""
        sql, args = "SELECT * FROM predictions WHERE state='pending'", ()
        if question_id is not None:
            sql, args = sql + " AND question_id=?", (question_id,)
        return [_prediction(row) for row in self.connection().execute(sql + " ORDER BY created_at", args)]

    def resolved(self, *, since: float | None = None, batch: int = 1000) -> Iterator[Prediction]:
        """Resolved predictions in resolution order (``since``: resolved after that time), read in batches."""
        # (time, id) keyset paging; a given ``since`` is strict, so start past every id at that time
        after, last_id = (-math.inf, "") if since is None else (since, "\U0010ffff")
        while True:
            rows = (
                self.connection()
                .execute(
                    "SELECT * FROM predictions WHERE state='resolved' AND (resolved_at, resolution_id) > (?, ?) "
                    "ORDER BY resolved_at, resolution_id LIMIT ?",  # a row-value range: one index seek a batch
                    (after, last_id, batch),
                )
                .fetchall()
            )
            if not rows:
                return
            for row in rows:
                yield _prediction(row)
            after, last_id = rows[-1][9], rows[-1][0]

    def counts(self) -> dict[str, int]:
        rows = self.connection().execute("SELECT state, COUNT(*) FROM predictions GROUP BY state").fetchall()
        return {"pending": 0, "resolved": 0, "voided": 0, **dict(rows)}

    def integrity(self) -> str:
        """``PRAGMA integrity_check``'s verdict: ``ok`` for a sound file."""
        return str(self.connection().execute("PRAGMA integrity_check").fetchone()[0])


def _already(resolution_id: str, row: tuple[str, str] | None, outcome_text: str) -> bool:
    if row is None:
        raise UnknownPrediction(f"no prediction {resolution_id!r}; predictions are resolved by the id the episode gave")
    state, stored = row
    if state == "voided":
        raise PredictionConflict(f"prediction {resolution_id!r} was voided; it cannot be resolved")
    if stored != outcome_text:
        raise PredictionConflict(
            f"prediction {resolution_id!r} is already resolved with outcome {stored}, not {outcome_text}; "
            "an outcome is final (void and re-predict to correct a wrong resolution)"
        )
    return False


def _prediction(row: tuple[Any, ...]) -> Prediction:
    rid, question, kind, forecast, payload, state, created, outcome, scores, resolved_at, tick = row
    return Prediction(
        rid,
        question,
        kind,
        json.loads(forecast),
        json.loads(payload),
        state,
        created,
        None if outcome is None else json.loads(outcome),
        None if scores is None else json.loads(scores),
        resolved_at,
        tick,
    )


def _retry(call: Any) -> Any:
    """Run ``call``, retrying while another process holds the lock (beyond what busy_timeout covers)."""
    for attempt in range(RETRIES):
        try:
            return call()
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == RETRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``: takes the write lock up front, retried while another process holds it."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        _retry(lambda: self.conn.execute("BEGIN IMMEDIATE"))
        return self.conn

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")
