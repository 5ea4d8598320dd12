"""kgrag: offline Graph-RAG toolkit."""
