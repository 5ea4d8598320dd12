"""The largest value a run can use, per kind of integer, and the pattern a path or a model
name must match: the bounds every schema number and name takes (``kgrag.declarations``
declares parameters with them; ``kgrag/spec/pipeline.schema.json`` repeats them).
"""

from __future__ import annotations

# Past its maximum a value is a typo (an extra
# zero, 2**64) that would otherwise pass validation and fail far from the spec, in a C
# library's 32-bit argument, an allocation or a loop that never ends.
SEED_MAX = 2**31 - 1  # every seeded library takes a signed 32-bit seed (llama.cpp reads
# 2**32 - 1 as "random", and the LLM's retries add 1 to its seed each)
TOKENS_MAX = 2**20  # a context window of 1,048,576 tokens, and any count of tokens in one
COUNT_MAX = 10**9  # questions, documents, chunks, steps: more than one machine holds
ITEMS_MAX = 100_000  # units, entities, triples or candidates one question or example weighs
WIDTH_MAX = 65_536  # batch sizes, layer widths, attention heads, LoRA ranks and α
ROUNDS_MAX = 10_000  # epochs, iterations, hops, layers
PLAIN_TEXT = r"^[^\u0000-\u001f\u007f-\u009f\u2028\u2029]*$"
"""The pattern of a path or a model name: no control character (a line break, a tab), which
no file or model needs and which would split the message that names it."""
