"""Two-stage entity canonicalisation (HugRAG, App. B.1; notes section 2.1 B).

An LLM names the same thing in several ways across chunks ("J. BIDEN", "JOE
BIDEN", "JOE BIDEN."), and every variant becomes its own node, which splits the
evidence for one entity over several weakly connected nodes. HugRAG merges them in
two stages, with no LLM call: surface matching on the names, then embedding
similarity between the names that are left. Merged entities pool their
descriptions and their supporting chunks; relationships follow their endpoints.

Defaults are the authors' (fuzzy >= 0.92, then cosine >= 0.93). Decisions the paper
leaves open, made here:

* **Surface key.** Names are compared after NFKD folding (accents dropped),
  upper-casing, deleting ``.`` and ``'`` (so "U.S.A." is "USA" and "J. BIDEN" is
  "J BIDEN"), turning other punctuation into spaces and collapsing whitespace.
  Names with the same key are one entity whatever the threshold.
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
  merged (in either stage) when the digit runs of the two keys differ ("APOLLO 11" / "APOLLO 13"), or when the names
  share a token and a token found in only one of them has at most 3 characters
  ("WORLD WAR I" / "WORLD WAR II" = 0.957, "PROTEIN KINASE A" / "C" = 0.938, "MR" /
  "MRS"). Short tokens carry too few characters for a similarity score to tell a
  typo from a different word, and these are the pairs both the ratio and a
  sentence embedding score highest. Exempt: the fillers "THE", "OF", "AND", and
  a short token that is the acronym of the other side's differing tokens ("US
  ARMY" / "UNITED STATES ARMY"); names with no token in common ("USA" / "UNITED
  STATES") are left to the embedding stage. The initials rule never expands a
  Roman numeral ("I" is not short for "II"). The cost: short-word typos ("JON
  SNOW" / "JOHN SNOW") stay apart.
* **Stage 2 embeds the name only.** Two different entities of one type get
  near-identical descriptions from a small extraction model ("a person mentioned
  in the text"), so description embeddings would merge them; the descriptions are
  also noisy and of uneven length. The name is the entity's identity in
  extraction, so it is what is compared. Only the stage-1 canonical names are
  embedded (one ``embed`` call, names sorted), and the vectors are re-normalised
  here, so ``embed`` may return raw or unit vectors. Cosines are computed in row
  blocks, so 20,000 names never need a 20,000 x 20,000 matrix at once.
* **Transitivity.** Both stages merge with a union-find, i.e. single linkage: A~B
  and B~C put A and C in one entity even when A and C are below the threshold.
  That is what a pairwise threshold with merging implies; the thresholds are high
  enough that chains are short. The identifier guard also acts per pair, so a
  chain through a third name could still join two guarded names.
* **Canonical name.** The member with the most evidence: most distinct source
  chunks, then the shortest name, then the alphabetically first. The order is
  total, so the result does not depend on row order, and the stage-2 winner is
  also the best name of the whole final group.
* **Merged rows.** ``type`` is the most frequent type other than ``other`` over the
  members (ties go to the member with most evidence; ``other`` when none has
  another). Descriptions are split on and joined with extraction's separator
  ("; "), distinct and in member order (canonical first, then by evidence), so a
  merged description never repeats a part and reads like extraction's own.
  ``source_chunk_ids`` are pooled distinct in the same order; ``grounded`` is any.
* **Relationships.** Endpoints are renamed; self-loops (also pre-existing ones)
  are dropped; rows over the same unordered pair merge: descriptions joined as
  above, ``strength`` the mean over the merged rows weighted by their number of
  source chunks (so it stays extraction's mean over per-chunk observations),
  ``weight`` the sum, chunks pooled, ``grounded`` any. The merged row keeps the
  orientation of its first row in sorted order. An endpoint that is not an entity
  is kept unchanged. Rows come out sorted by (source, target).
* **Columns.** Output frames have exactly extraction's schema
  (``ENTITY_FRAME_SCHEMA`` / ``RELATIONSHIP_FRAME_SCHEMA``); extra input columns
  are dropped. Entity names must be unique (``extraction.merge`` guarantees it).

Cost: both stages are exact and quadratic, in blocks of about 4 Mi scores. The
fuzzy stage only scores pairs whose lengths allow the threshold (``fuzzy_pairs``)
and the cosine stage only the upper triangle. 20,000 synthetic names with 384-d
vectors take about 6 s on 2 CPU cores (0.8 s fuzzy, 4 s cosines), plus the
caller's embedding time.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

from kgrag.errors import KgragError
from kgrag.graphs.extraction import (
    DESCRIPTION_SEPARATOR,
    ENTITY_FRAME_SCHEMA,
    RELATIONSHIP_FRAME_SCHEMA,
)

Embed = Callable[[list[str]], np.ndarray]

# Entries per similarity block (4 Mi float32 = 16 MB), for both stages.
_BLOCK_ELEMENTS = 1 << 22
# A token of at most this many characters found in only one of two names marks them
# as different entities (see the module docstring).
_SHORT_TOKEN = 3
_DIGITS = re.compile(r"\d+")
_FILLERS = frozenset({"THE", "OF", "AND"})
# Roman numerals are identifiers, not words an initial could stand for ("WORLD WAR
# I" is not "WORLD WAR II" abbreviated).
_ROMAN = re.compile(r"^M{0,4}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$")


@dataclass(frozen=True)
class Canonical:
    """The canonicalised graph and a record of what was merged.

    ``aliases`` maps every merged-away input name to its canonical name (canonical
    names map to nothing). ``fuzzy_merges`` and ``embedding_merges`` count the
    names absorbed by each stage (input entities minus stage-1 entities, stage-1
    entities minus final entities).
    """

    entities: pl.DataFrame
    relationships: pl.DataFrame
    aliases: dict[str, str] = field(default_factory=dict)
    fuzzy_merges: int = 0
    embedding_merges: int = 0


class _UnionFind:
    """Disjoint sets over 0..n-1 (path halving, union by index keeps it simple)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        ri, rj = self.find(i), self.find(j)
        if ri != rj:
            self.parent[max(ri, rj)] = min(ri, rj)

    def groups(self) -> list[list[int]]:
        """Members of each set, sets ordered by their smallest member."""
        found: dict[int, list[int]] = {}
        for i in range(len(self.parent)):
            found.setdefault(self.find(i), []).append(i)
        return list(found.values())


def surface_key(name: str) -> str:
    """The form names are compared in: accents folded, upper-case, ``.``/``'``
    deleted, other punctuation a space, whitespace collapsed. Falls back to the
    stripped name when nothing alphanumeric is left."""
    folded = unicodedata.normalize("NFKD", name)
    folded = "".join(c for c in folded if not unicodedata.combining(c)).upper()
    folded = re.sub(r"[.'\u2019]", "", folded)
    key = " ".join(re.sub(r"[^\w]+", " ", folded).replace("_", " ").split())
    return key or name.strip()


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


def _evidence_rank(name: str, chunks: dict[str, list[str]]) -> tuple[int, int, str]:
    """Sort key: most distinct source chunks, then shortest, then alphabetical."""
    return (-len(set(chunks[name])), len(name), name)


def _join(descriptions: Iterable[str]) -> str:
    """Distinct non-empty description parts in first-seen order, joined with
    extraction's separator (already joined descriptions are split first)."""
    parts = (p.strip() for d in descriptions for p in (d or "").split(DESCRIPTION_SEPARATOR))
    return DESCRIPTION_SEPARATOR.join(dict.fromkeys(p for p in parts if p))


def _require(frame: pl.DataFrame, schema: dict[str, pl.DataType], what: str) -> None:
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise KgragError(f"the {what} table lacks column(s) {', '.join(missing)}")


def _merge_stage(names: list[str], pairs: Iterable[tuple[int, int]],
                 chunks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Union the index pairs; return canonical name -> members (best first)."""
    uf = _UnionFind(len(names))
    for i, j in pairs:
        uf.union(i, j)
    groups: dict[str, list[str]] = {}
    for members in uf.groups():
        ranked = sorted((names[i] for i in members), key=lambda m: _evidence_rank(m, chunks))
        groups[ranked[0]] = ranked
    return groups


def _stage_one(names: list[str], fuzzy: float,
               chunks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Surface canonicalisation: same key, fuzzy ratio, or unique initials."""
    keys_of = {n: surface_key(n) for n in names}
    keys = sorted(set(keys_of.values()))
    index = {k: i for i, k in enumerate(keys)}
    key_pairs = [(i, j) for i, j in fuzzy_pairs(keys, fuzzy)
                 if not distinct_identifiers(keys[i], keys[j])]
    key_pairs += initial_pairs(keys)
    uf = _UnionFind(len(keys))
    for i, j in key_pairs:
        uf.union(i, j)
    first_name: dict[int, int] = {}
    pairs = []
    for pos, name in enumerate(names):
        root = uf.find(index[keys_of[name]])
        pairs.append((first_name.setdefault(root, pos), pos))
    return _merge_stage(names, pairs, chunks)


def _stage_two(canon: list[str], embed: Embed, cosine: float,
               chunks: dict[str, list[str]]) -> dict[str, list[str]]:
    """Embedding canonicalisation over the stage-1 names (name text only)."""
    if len(canon) < 2:
        return {n: [n] for n in canon}
    vectors = np.asarray(embed(list(canon)))
    if vectors.ndim != 2 or vectors.shape[0] != len(canon):
        raise KgragError(f"embed returned shape {vectors.shape} for {len(canon)} names; "
                         f"expected ({len(canon)}, dim)")
    keys = [surface_key(n) for n in canon]
    pairs = [(i, j) for i, j in cosine_pairs(vectors, cosine)
             if not distinct_identifiers(keys[i], keys[j])]
    return _merge_stage(canon, pairs, chunks)


def _entity_row(canonical: str, members: list[str],
                rows: dict[str, dict]) -> dict:
    """One merged entity row; ``members`` are ordered best evidence first."""
    types = [rows[m]["type"] for m in members if rows[m]["type"] != "other"]
    counts = {t: types.count(t) for t in dict.fromkeys(types)}
    kind = max(counts, key=lambda t: counts[t]) if counts else "other"
    return {
        "name": canonical,
        "type": kind,
        "description": _join(rows[m]["description"] for m in members),
        "source_chunk_ids": list(dict.fromkeys(
            c for m in members for c in (rows[m]["source_chunk_ids"] or []))),
        "grounded": any(bool(rows[m]["grounded"]) for m in members),
    }


def _relationship_sort_key(row: dict) -> tuple:
    return (row["source"], row["target"], row["description"] or "", row["strength"] or 0.0,
            row["weight"] or 0, tuple(row["source_chunk_ids"] or ()), bool(row["grounded"]))


def merge_relationships(relationships: pl.DataFrame,
                        aliases: dict[str, str]) -> pl.DataFrame:
    """Rename endpoints through ``aliases``, drop self-loops, merge unordered pairs."""
    _require(relationships, RELATIONSHIP_FRAME_SCHEMA, "relationships")
    ordered = sorted(relationships.select(list(RELATIONSHIP_FRAME_SCHEMA)).to_dicts(),
                     key=_relationship_sort_key)
    grouped: dict[frozenset[str], list[dict]] = {}
    for row in ordered:
        source = aliases.get(row["source"], row["source"])
        target = aliases.get(row["target"], row["target"])
        if source != target:
            grouped.setdefault(frozenset((source, target)), []).append(
                {**row, "source": source, "target": target})
    merged = []
    for seen in grouped.values():
        counts = [max(1, len(r["source_chunk_ids"] or [])) for r in seen]
        strength = sum(float(r["strength"] or 0.0) * c for r, c in zip(seen, counts))
        merged.append({
            "source": seen[0]["source"],
            "target": seen[0]["target"],
            "description": _join(r["description"] for r in seen),
            "strength": strength / sum(counts),
            "weight": sum(int(r["weight"] or 0) for r in seen),
            "source_chunk_ids": list(dict.fromkeys(
                c for r in seen for c in (r["source_chunk_ids"] or []))),
            "grounded": any(bool(r["grounded"]) for r in seen),
        })
    merged.sort(key=lambda r: (r["source"], r["target"]))
    return pl.DataFrame(merged, schema=RELATIONSHIP_FRAME_SCHEMA)


def canonicalise(entities: pl.DataFrame, relationships: pl.DataFrame, embed: Embed, *,
                 fuzzy: float = 0.92, cosine: float = 0.93) -> Canonical:
    """Merge duplicate entities in two stages and rewrite the relationships.

    ``embed`` maps a list of names to one vector per name (raw or unit rows); it is
    called at most once, with the stage-1 canonical names in sorted order, and not
    at all when fewer than two are left. The result does not depend on the row
    order of either frame. See the module docstring for every rule.
    """
    if not 0.0 < fuzzy <= 1.0 or not -1.0 <= cosine <= 1.0:
        raise KgragError(f"canonicalisation thresholds out of range: fuzzy={fuzzy} "
                         f"(needs 0 < fuzzy <= 1), cosine={cosine} (needs -1..1)")
    _require(entities, ENTITY_FRAME_SCHEMA, "entities")
    rows = {}
    for row in entities.select(list(ENTITY_FRAME_SCHEMA)).to_dicts():
        if row["name"] is None or row["name"] in rows:
            raise KgragError(f"entity names must be unique and non-null; got {row['name']!r} "
                             "twice (merge the extractions first)")
        rows[row["name"]] = row
    names = sorted(rows)
    chunks = {n: list(rows[n]["source_chunk_ids"] or []) for n in names}

    first = _stage_one(names, fuzzy, chunks)
    second = _stage_two(sorted(first), embed, cosine, chunks)

    aliases: dict[str, str] = {}
    entity_rows = []
    for canonical in sorted(second):
        members = sorted((m for c in second[canonical] for m in first[c]),
                         key=lambda m: _evidence_rank(m, chunks))
        aliases.update({m: canonical for m in members if m != canonical})
        entity_rows.append(_entity_row(canonical, members, rows))
    return Canonical(
        entities=pl.DataFrame(entity_rows, schema=ENTITY_FRAME_SCHEMA),
        relationships=merge_relationships(relationships, aliases),
        aliases=aliases,
        fuzzy_merges=len(names) - len(first),
        embedding_merges=len(first) - len(second),
    )
