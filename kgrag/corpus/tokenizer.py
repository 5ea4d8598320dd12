"""Token counting with the embedder's own tokenizer.

Chunk sizes and context budgets are measured in tokens of the embedding
model, because that is the unit in which the embedder truncates its input. A
thin wrapper over Hugging Face ``tokenizers`` (the fast Rust implementation)
gives exact counts and character offsets without loading the model itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer as HFTokenizer

from kgrag.errors import KgragError

BATCH = 1_000  # texts encoded in one parallel call by the *_many methods


class Tokenizer:
    """Counts tokens and reports token offsets for plain text.

    Truncation and padding are switched off (model folders often ship a
    ``tokenizer.json`` that truncates to 128 tokens and pads to a fixed length,
    which would make every count wrong), and special tokens such as ``[CLS]``
    are never added, so a count is the number of content tokens.
    """

    def __init__(self, backend: HFTokenizer) -> None:
        """Wrap ``backend``, switching off its truncation and padding in place."""
        backend.no_truncation()
        backend.no_padding()
        self._backend = backend

    @classmethod
    def from_dir(cls, path: Path) -> Tokenizer:
        """Load ``path / "tokenizer.json"``, the file every Hugging Face model folder carries."""
        file = Path(path) / "tokenizer.json"
        if not file.is_file():
            raise KgragError(f"no tokenizer.json in {path}; point at the embedding model's folder")
        try:
            backend = HFTokenizer.from_file(str(file))
        except Exception as exc:  # noqa: BLE001 - tokenizers raises bare Exception on bad files
            raise KgragError(f"cannot read tokenizer {file}: {exc}") from None
        return cls(backend)

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        return len(self._backend.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Return token counts for many texts, ``BATCH`` at a time in one parallel call
        each: an encoding holds every token's id, string and offsets, so a million texts'
        encodings at once would take tens of GB."""
        texts = list(texts)
        return [len(encoding.ids) for at in range(0, len(texts), BATCH)
                for encoding in self._backend.encode_batch(texts[at:at + BATCH],
                                                           add_special_tokens=False)]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Return the (start, end) character span of each token of ``text``."""
        return list(self._backend.encode(text, add_special_tokens=False).offsets)

    def offsets_many(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Return token character spans for many texts in one parallel batch."""
        encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
        return [list(encoding.offsets) for encoding in encodings]
