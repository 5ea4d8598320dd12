

def test_the_search_memo_tells_embedder_backends_apart() -> None:
    """An int8 backend's vectors are not the fp32 ones, so a loaded search (its name
    links and synonyms embedded) is not reused across backends of one model."""
    from types import SimpleNamespace

    from kgrag.retrieval.ppr_search import _identity

    def embedder(backend: str) -> SimpleNamespace:
        return SimpleNamespace(settings=SimpleNamespace(sha256="a" * 64, backend=backend))

    assert _identity(embedder("torch")) == "a" * 64
    assert _identity(embedder("openvino-int8")) != _identity(embedder("torch"))
    assert _identity(None) is None
