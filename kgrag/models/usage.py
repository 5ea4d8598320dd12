"""Token and call accounting shared by the model layers.

Counters only ever grow; the runner snapshots them around each step and
records the difference, so no step has to count anything itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass
class Usage:
    """Model work done: ``calls`` really ran the model, ``cache_hits`` were replayed.

    Token counts cover both, because a replayed call still stands for the tokens
    the pipeline would have spent (hits replay the counts recorded at the miss).
    """

    calls: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def snapshot(self) -> Usage:
        return Usage(**asdict(self))

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def since(self, before: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)})

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
