"""What a personalised-PageRank walk takes from the spec (``WALK_PARAMS``): strategy
``ppr``'s parameters, and those of the ppr channels of ``ket`` (``skeleton_search: ppr``)
and ``hugrag`` (``entity_seeds: ppr``), with the checks they share (``walk_problems``).
The walk itself is ``kgrag.retrieval.ppr_search``.
"""

from __future__ import annotations

from collections.abc import Iterator

from kgrag.declarations import Config, Param, Problem
from kgrag.graphs.extraction.methods import EXTRACTION_METHODS, method_of, parses
from kgrag.limits import ITEMS_MAX, ROUNDS_MAX

# walk: push's tolerance when push_epsilon is left out (chosen on the dev halves,
# docs/methods/ppr.md)
PUSH_EPSILON = 1e-5
# walk: auto's switch: the power walk reads every edge for every question, about 33 ms
# at 11,000 chunks and 504 ms at 110,000 (docs/scale.md), so past this many chunks it
# would miss the 250 ms a question of the scale target allows, and the push walk,
# whose cost does not grow with the graph, takes over
PUSH_PAST = 50_000
# A personalised-PageRank walk's parameters: strategy ppr's, and those of the ppr channels
# of ket (skeleton_search: ppr) and hugrag (entity_seeds: ppr).
WALK_PARAMS = (
    Param("damping", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
          "probability that the walk follows an edge rather than restarting at the seeds; "
          "HippoRAG's 0.5 keeps mass near the question's entities.", default=0.5),
    Param("max_iterations", {"type": "integer", "minimum": 1, "maximum": ROUNDS_MAX},
          "power-iteration steps at most (it stops earlier once an update changes the scores "
          "by less than 1e-10).", default=50),
    Param("walk", {"enum": ["auto", "power", "push"]},
          "how the walk is computed: power (power iteration over the whole graph, exact to "
          "1e-10; a question costs every edge, about 0.5 s at 110,000 chunks and 10 s at a "
          "million), push (a local forward push from the seeds, stopping at push_epsilon; "
          "its cost is the seeds' neighbourhood, not the graph, and it ranks a little "
          f"differently) or auto (power up to {PUSH_PAST:,} chunks, push past them).",
          default="auto", off="power"),
    Param("push_epsilon", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
          "the push walk stops once every node's residual mass is below this times its "
          "edge count; smaller is closer to the power walk and slower (its work is at most "
          f"1 / ((1 − damping) × push_epsilon) edge visits). Left out: {PUSH_EPSILON:g}."),
    Param("dense_seeds", {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
          "share of the restart mass given to the dense_seed_chunks chunks nearest the "
          "question, by their min-max normalised cosine (the passage nodes' own restart "
          "mass); 0 seeds entities only. Default: 0.02 for strategy ppr, 0 for the ppr "
          "channels of ket and hugrag. (HippoRAG 2's 0.05 is a per-passage weight beside "
          "unnormalised entity weights, a far larger share.)", default=0),
    Param("dense_seed_chunks", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
          "how many of the chunks nearest the question share the dense_seeds mass.",
          default=10),
    Param("titles", {"type": "boolean"},
          "each chunk's title is one more entity linked to the chunk (set false for corpora "
          "whose titles are ids).", default=True),
    Param("specific_steps", {"type": "boolean"},
          "weight each entity–chunk edge by the entity's specificity (1 / chunks mentioning "
          "it), so the walk leaves a chunk by its rare entities rather than hub concepts; "
          "false weights every mention edge 1.", default=True),
    Param("question_mentions", {"type": "boolean"},
          "also seed from the question's mentions as the nlp extraction finds them in a chunk "
          "(the same spaCy pipeline and rules), matched to graph names by normalised words. "
          "Needs an extraction method that parses (nlp, hybrid). Left out: false (only graph "
          "names found in the question).", off=False),
    Param("nearest_names", {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
          "link a question mention no graph name matches to the entity whose name embedding "
          "is nearest, when the cosine is at least this value (needs question_mentions). "
          "Embeds every entity name once (cached). Left out: off."),
    Param("synonyms", {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
          "HippoRAG's synonym edges, weighted by their cosine, between entities whose name "
          "embeddings are at least this close. Embeds every entity name once (cached). Left "
          "out: no synonym edges."),
    Param("phrases", {"enum": ["all", "named"]},
          "which entities are phrase nodes: all (every extracted entity and noun chunk) or "
          "named (named entities other than dates and numbers, and noun chunks that are or "
          "hold a proper name; titles stay). Default: named for strategy ppr, all for the "
          "ppr channels of ket and hugrag.", off="all"),
    Param("relations", {"type": "boolean"},
          "keep the entity–entity relationship edges; false walks the phrase–passage graph "
          "alone. Left out: true.", off=True),
    Param("fact_links", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
          "HippoRAG 2's query-to-fact linking: the entities of the this-many relationships "
          "(rendered as 'SUBJECT relation OBJECT') whose embeddings are nearest the "
          "question's also seed the walk, weighted by similarity times specificity. Embeds "
          "every relationship once (cached). Left out: names found in the question only."),
    Param("seeds_near", {"type": "integer", "minimum": 0, "maximum": ITEMS_MAX},
          "keep only the question's seed entities one of whose chunks is among the "
          "this-many chunks nearest the question by dense similarity (all of them when "
          "none is): a name the question shares with passages far from it, such as a "
          "distractor's 'Python', seeds no walk; 0 keeps every seed. Default: 50 for "
          "strategy ppr (chosen on the dev halves and on a scale corpus's dev needles), "
          "every seed for the ppr channels of ket and hugrag.", off=0),
    Param("name_links", {"type": "integer", "minimum": 1, "maximum": ITEMS_MAX},
          "the this-many phrase nodes whose name embeddings are nearest the question's "
          "vector also seed the walk, weighted by similarity times specificity. Embeds every "
          "entity name once (cached). Left out: no name links."),
)


def walk_of(config: Config, chunks: int) -> str:
    """The walk a search over ``chunks`` chunks takes: ``config``'s, auto's by the
    graph's size; none (a landed spec's ``walk: power``, dropped as its off value) is
    power."""
    walk = config.get("walk") or "power"
    if walk == "auto":
        return "push" if chunks > PUSH_PAST else "power"
    return walk


def walk_problems(index: int, entry: Config, spec: Config) -> Iterator[Problem]:
    """The question-mention options need the nlp extraction's pipeline, the nearest-name
    fallback needs mentions to link, and push_epsilon a walk that may push."""
    if entry.get("push_epsilon") is not None and entry.get("walk") == "power":
        yield ("query", index, "push_epsilon"), (
            "push_epsilon is the tolerance of the push walk; set walk: push or auto, or "
            "leave push_epsilon out")
    if entry.get("question_mentions") and not parses(method_of(spec["extraction"])):
        yield ("query", index, "question_mentions"), (
            "question_mentions finds mentions with the nlp extraction's spaCy pipeline; set "
            f"extraction: {{method: nlp}} (or another method that parses: "
            f"{', '.join(m.name for m in EXTRACTION_METHODS.values() if parses(m))})")
    if entry.get("nearest_names") and not entry.get("question_mentions"):
        yield ("query", index, "nearest_names"), (
            "nearest_names links question mentions no name matches; set question_mentions: "
            "true")


def walks(entry: Config) -> bool:
    """Whether a strategy entry ranks through a personalised-PageRank walk: ``ppr``, or
    a ppr channel of ``ket`` or ``hugrag``."""
    return (entry.get("strategy") == "ppr" or entry.get("skeleton_search") == "ppr"
            or entry.get("entity_seeds") == "ppr")
