"""Query strategies: a question in, a context within a token budget out.

Each strategy module declares itself once, as ``DECLARATION``
(``kgrag.declarations.Strategy``): its parameters, the artefacts it reads and the
class that retrieves (``load(config, artefacts, resources)``,
``retrieve(question, vector) -> Evidence``). A class that ranks chunks also has
``ranking(question, vector) -> [chunk ids, best first]``, which makes its strategy one
that a strategy built on other entries can use. ``STRATEGIES`` below is the spec's
``strategy`` enum.

A strategy built on other entries of the spec (``fusion``'s ``fuse``, ``ras``'s
``retriever``: ``Strategy.members``) is handled here, once, for every such strategy:
compile puts each named entry's concrete config in its place; its members' artefacts
are its inputs under role names prefixed by the member's role (``needs``); each member
is loaded from them, prefix stripped, and handed to the strategy's ``load`` in
``resources.members`` (``load``). Members are resolved one level deep, so a member
is a strategy that ranks chunks and is built on no other entry (``RANKERS``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kgrag.declarations import Config, Need, Strategy
from kgrag.errors import KgragError
from kgrag.retrieval import bm25, fusion, hugrag, hybrid, ket, knng, naive, ppr, ras, triples
from kgrag.retrieval.resources import Resources

__all__ = ["RANKERS", "STRATEGIES", "Resources", "inputs", "load", "members", "needs"]

STRATEGIES: dict[str, Strategy] = {
    module.DECLARATION.name: module.DECLARATION
    for module in (naive, ket, knng, hybrid, hugrag, bm25, fusion, ppr, ras)} | {
    declared.name: declared for declared in triples.DECLARATIONS}
RANKERS: tuple[str, ...] = tuple(sorted(
    name for name, declared in STRATEGIES.items()
    if hasattr(declared.runs, "ranking") and declared.member_key is None))


def members(config: Config) -> dict[str, Config]:
    """Role → the concrete config of each member of a compiled entry, each checked to be
    one that ranks chunks (a clear error for API users: specs are checked earlier)."""
    found = STRATEGIES[config["strategy"]].members(config)
    for member in found.values():
        if not isinstance(member, Mapping):
            raise KgragError(f"strategy {config['name']!r}: "
                             f"{STRATEGIES[config['strategy']].member_key} needs the configs of "
                             "the entries it names (a spec names them; compile resolves them)")
        if member["strategy"] not in RANKERS:
            raise KgragError(f"strategy {config['name']!r}: {member['strategy']} does not rank "
                             f"chunks; name an entry of {', '.join(RANKERS)}")
    return found


def needs(config: Config) -> dict[str, Need]:
    """What a compiled entry reads, by input role: its own needs and its members'."""
    return dict(STRATEGIES[config["strategy"]].needs(config)) | {
        f"{role}.{own}": need for role, member in members(config).items()
        for own, need in needs(member).items()}


def inputs(config: Config, trained: Mapping[str, str] | None = None) -> dict[str, str]:
    """The step each input role of a compiled entry reads (a member's needs resolved
    against the member's config); ``trained``: training entry name → its model's step."""
    return STRATEGIES[config["strategy"]].inputs(config, trained) | {
        f"{role}.{own}": step for role, member in members(config).items()
        for own, step in inputs(member, trained).items()}


def load(config: Config, artefacts: dict[str, Path], resources: Resources) -> Any:
    """A compiled entry's strategy, its members loaded first from their own artefacts."""
    loaded = {role: load(member, {own.removeprefix(f"{role}."): path
                                  for own, path in artefacts.items()
                                  if own.startswith(f"{role}.")}, resources)
              for role, member in members(config).items()}
    return STRATEGIES[config["strategy"]].runs.load(
        config, artefacts, dataclasses.replace(resources, members=loaded))
