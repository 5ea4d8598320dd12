"""Which entity names may name one entity: the pairs canonicalisation merges.

Names are compared by their ``surface_key`` (``kgrag.graphs.names``). Decisions the
paper (HugRAG, App. B.1) leaves open, made here:

* **Scorer.** ``rapidfuzz.fuzz.ratio`` / 100 on the keys (normalised Indel
  similarity), in row blocks of ``process.cdist``. It is symmetric and has no
  partial or token-subset matching: ``token_set_ratio``, ``partial_ratio`` and
  ``WRatio`` score "BANK" against "BANK OF AMERICA" at 0.90-1.0, and those are
  different entities. At 0.92 the ratio catches typos, plurals and punctuation
  ("BARAK OBAMA" / "BARACK OBAMA" = 0.957) but not the paper's own example, "J.
  BIDEN" / "JOE BIDEN" (0.875), which no character score reaches without also
  merging "JOHN SMITH" / "JANE SMITH" (0.80). So the stage adds one rule:
* **Initials.** Two names of the same number (>= 2) of tokens whose tokens agree
  position by position, where a single letter matches a longer token that starts
  with it and at least one token of two or more letters is equal ("J BIDEN" ~ "JOE
  BIDEN"), are merged when the match is *mutual and unique*: neither name is
  initial-compatible with any other key. "J. SMITH" next to both "JOHN SMITH" and
  "JANE SMITH" is ambiguous and merges with neither.
* **Identifiers are not typos.** Apart from the initials rule, a pair is never
  merged (by the fuzzy or the embedding score) when the digit runs of the two keys
  differ ("APOLLO 11" / "APOLLO 13"), or when the names share a token and a token
  found in only one of them has at most 3 characters ("WORLD WAR I" / "WORLD WAR
  II" = 0.957, "PROTEIN KINASE A" / "C" = 0.938, "MR" / "MRS"). Short tokens carry
  too few characters for a similarity score to tell a typo from a different word,
  and these are the pairs both the ratio and a sentence embedding score highest.
  Exempt: the fillers "THE", "OF", "AND", and a short token that is the acronym of
  the other side's differing tokens ("US ARMY" / "UNITED STATES ARMY"); names with
  no token in common ("USA" / "UNITED STATES") are left to the embedding score. The
  initials rule never expands a Roman numeral ("I" is not short for "II"). The
  cost: short-word typos ("JON SNOW" / "JOHN SNOW") stay apart.

Cost: both scores are exact and quadratic, in blocks of about 4 Mi scores.
``fuzzy_pairs`` only scores pairs whose lengths allow the threshold and
``cosine_pairs`` only the upper triangle, so tens of thousands of names take
seconds on two CPU cores (``benchmarks/`` measures it).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

import numpy as np
from rapidfuzz import fuzz, process

# Entries per similarity block (4 Mi float32 = 16 MB), for both scores.
_BLOCK_ELEMENTS = 1 << 22
# A token of at most this many characters found in only one of two names marks them
# as different entities (see the module docstring).
_SHORT_TOKEN = 3
_DIGITS = re.compile(r"\d+")
_FILLERS = frozenset({"THE", "OF", "AND"})
# Roman numerals are identifiers, not words an initial could stand for ("WORLD WAR
# I" is not "WORLD WAR II" abbreviated).
_ROMAN = re.compile(r"^M{0,4}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$")


def distinct_identifiers(a: str, b: str) -> bool:
    """Whether two keys differ in a number or in a short token, which makes them
    different entities however similar the rest is ("WORLD WAR I" / "... II").

    The short-token test applies only to names that share a token (so "USA" /
    "UNITED STATES" stays open to the embedding stage), ignores the fillers
    "THE", "OF", "AND", and lets an acronym of the other side's differing tokens
    pass ("US ARMY" / "UNITED STATES ARMY").
    """
    if _DIGITS.findall(a) != _DIGITS.findall(b):
        return True
    ta, tb = a.split(), b.split()
    if not set(ta) & set(tb):
        return False
    only_a = [t for t in ta if t not in tb and t not in _FILLERS]
    only_b = [t for t in tb if t not in ta and t not in _FILLERS]
    for short, other in ((only_a, only_b), (only_b, only_a)):
        if len(short) == 1 and len(other) >= 2 and short[0] == "".join(t[0] for t in other):
            return False
    return any(len(t) <= _SHORT_TOKEN for t in only_a + only_b)


def _initial_compatible(a: Sequence[str], b: Sequence[str]) -> bool:
    """Token lists that agree position by position up to initials, with an
    equal token of >= 2 letters as anchor ("J BIDEN" vs "JOE BIDEN"). The token an
    initial stands for must be a word of letters that is not a Roman numeral."""
    if len(a) != len(b) or len(a) < 2 or list(a) == list(b):
        return False
    anchored = False
    for x, y in zip(a, b):
        if x == y:
            anchored = anchored or len(x) >= 2
            continue
        short, long = (x, y) if len(x) <= len(y) else (y, x)
        if not (len(short) == 1 and short.isalpha() and len(long) > 1 and long.isalpha()
                and long.startswith(short) and not _ROMAN.match(long)):
            return False
    return anchored


def initial_pairs(keys: Sequence[str]) -> list[tuple[int, int]]:
    """Index pairs of keys that are mutually and uniquely initial-compatible.

    Keys are bucketed by token initials (compatible keys share them), so only
    keys within a bucket that hold a single-letter token are compared.
    """
    tokens = [k.split() for k in keys]
    buckets: dict[tuple[str, ...], list[int]] = {}
    for i, toks in enumerate(tokens):
        if len(toks) >= 2:
            buckets.setdefault(tuple(t[0] for t in toks), []).append(i)
    partners: dict[int, set[int]] = {}
    for members in buckets.values():
        abbreviated = [i for i in members if any(len(t) == 1 for t in tokens[i])]
        for i in abbreviated:
            for j in members:
                if i != j and _initial_compatible(tokens[i], tokens[j]):
                    partners.setdefault(i, set()).add(j)
                    partners.setdefault(j, set()).add(i)
    return sorted((i, j) for i, js in partners.items() for j in js
                  if i < j and partners[j] == {i} and js == {j})


def fuzzy_pairs(keys: Sequence[str], threshold: float) -> list[tuple[int, int]]:
    """Index pairs (i < j) of keys with ``fuzz.ratio / 100 >= threshold``.

    ``fuzz.ratio`` is 2·LCS / (len a + len b), so it cannot reach ``threshold``
    when the longer key exceeds the shorter by more than a factor (2 - t) / t
    (1.17 at 0.92). Keys are sorted by length and each row block is scored with
    ``process.cdist`` (all cores; scores do not depend on the worker count) only
    against the keys from its own first row up to that length bound: each pair is
    scored once, and far fewer pairs than n² are scored.
    """
    n = len(keys)
    if n < 2:
        return []
    order = sorted(range(n), key=lambda i: (len(keys[i]), keys[i]))
    by_length = [keys[i] for i in order]
    lengths = [len(k) for k in by_length]
    cutoff = threshold * 100.0 - 1e-9
    stretch = (2.0 - threshold) / threshold
    rows = max(1, _BLOCK_ELEMENTS // n)
    pairs: list[tuple[int, int]] = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        end = bisect.bisect_right(lengths, lengths[stop - 1] * stretch + 1e-9)
        block = process.cdist(by_length[start:stop], by_length[start:end], scorer=fuzz.ratio,
                              score_cutoff=cutoff, dtype=np.float32, workers=-1)
        for i, j in zip(*np.nonzero(block >= cutoff)):
            if i < j:
                a, b = order[start + int(i)], order[start + int(j)]
                pairs.append((min(a, b), max(a, b)))
    return sorted(pairs)


def cosine_pairs(vectors: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """Index pairs (i < j) whose row cosine is ``>= threshold``, in row blocks.

    Rows are normalised here; a zero row has cosine 0 with everything. Each block
    is multiplied only with the rows from its own first row on (the upper
    triangle), so every pair is computed once.
    """
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)
    n = len(v)
    rows = max(1, _BLOCK_ELEMENTS // max(n, 1))
    pairs: list[tuple[int, int]] = []
    for start in range(0, n, rows):
        sims = v[start:start + rows] @ v[start:].T
        for i, j in zip(*np.nonzero(sims >= threshold - 1e-6)):
            if i < j:
                pairs.append((start + int(i), start + int(j)))
    return pairs
