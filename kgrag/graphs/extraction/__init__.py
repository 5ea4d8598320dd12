"""Extraction: chunks → entities and relationships, by method.

methods (the extraction methods a spec names: llm, nlp, hybrid, each with its
behaviour), llm + prompt (GraphRAG-style LLM extraction and its constrained prompt),
nlp (spaCy), hybrid (spaCy entities, LLM relations).
"""
