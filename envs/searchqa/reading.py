"""Reading facts back from retrieved passages, and the golden sub-query of one hop.

The expert uses these to answer from what it retrieved; the question generator uses ``sub_query`` to
write each question's golden sub-queries, so the two always agree.
"""

from __future__ import annotations

import re

from agentenvs.retrieval.corpus import split_title

QUERY_WORDS = {
    "born": "born", "birthplace": "born", "country": "city country", "population": "population",
    "capital": "capital", "founder": "founded by", "headquarters": "headquarters", "founded": "founded",
    "author": "by", "year": "year",
}  # fmt: skip
"""The words a golden sub-query adds to its subject, per relation."""

FACTS = {
    "born": re.compile(r"\(born (\d+)\)|born in \w+ in (\d+)\."),
    "birthplace": re.compile(r"born in ([A-Z]\w*)"),
    "country": re.compile(r"is a city in (\w+)\.|a city of (\w+) founded"),
    "population": re.compile(r"population of (\d+)"),
    "capital": re.compile(r"capital is (\w+)"),
    "founder": re.compile(r"founded in \d+ by (.+?)\. Its headquarters|Founded by (.+?) in \d+, "),
    "headquarters": re.compile(r"headquarters are in (\w+)|headquartered in (\w+)"),
    "founded": re.compile(r"[Ff]ounded (?:by .+? )?in (\d+)"),
    "author": re.compile(r"\bby (.+?)(?:, completed in \d+)?\. "),
    "year": re.compile(r"completed in (\d+)|is an? (\d+) "),
}
"""One pattern per relation, matching both phrasings of ``tasks/searchqa/passages.py``."""


def sub_query(subject_title: str, relation: str) -> str:
    """The golden sub-query for one hop: ``Ana Bell painter born`` for ``Ana Bell (painter)``'s birth year."""
    plain = subject_title.replace("(", "").replace(")", "")
    return f"{plain} {QUERY_WORDS[relation]}"


def read_fact(passages: list[str], subject_title: str, relation: str) -> str | None:
    """The value of ``relation`` in the retrieved passage titled ``subject_title``, or None if none says it."""
    for passage in passages:
        title, text = split_title(passage)
        if title != subject_title:
            continue
        found = FACTS[relation].search(text + " ")
        if found:
            return next(group for group in found.groups() if group)
    return None


def plain_name(title: str) -> str:
    """``Ana Bell`` for ``Ana Bell (painter)``."""
    return re.sub(r" \([^)]*\)$", "", title)
