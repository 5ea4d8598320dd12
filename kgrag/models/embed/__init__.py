"""Embedders: sentence-transformers or an exported copy of its model on an optimised
runtime.

embedder (the interface, cached per text on disk), backends (the backends by name),
export (a model exported once per backend), runtime (the exported model's session).
"""
