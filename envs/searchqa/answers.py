"""Search-R1's answer scoring (``verl/utils/reward_score/qa_em.py``): SQuAD normalisation, exact match, and
token F1 as a metric beside it."""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles (a, an, the), single spaces: Search-R1's ``normalize_answer``."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def em_check(prediction: str, golden_answers: list[str] | str) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer."""
    golds = [golden_answers] if isinstance(golden_answers, str) else golden_answers
    predicted = normalize_answer(prediction)
    return float(any(normalize_answer(gold) == predicted for gold in golds))


def f1_score(prediction: str, golden_answers: list[str] | str) -> float:
    """The best token-overlap F1 against the gold answers (SQuAD's, after the same normalisation)."""
    golds = [golden_answers] if isinstance(golden_answers, str) else golden_answers
    predicted = normalize_answer(prediction).split()
    best = 0.0
    for gold in golds:
        expected = normalize_answer(gold).split()
        common = sum((Counter(predicted) & Counter(expected)).values())
        if common:
            precision, recall = common / len(predicted), common / len(expected)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best
