"""Graph building blocks for the graph-based retrieval methods.

KET-RAG's LLM-free parts live here as pure functions over arrays and frames:
the KNN chunk graph (``knn``), core-chunk selection (``core``), sub-chunks
(``subchunks``) and the keyword–sub-chunk bipartite graph (``bipartite``). The
pipeline steps that read specs, caches and artefact folders wrap them.
"""
