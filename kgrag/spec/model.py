"""The name ``kgrag.configuration`` had before it moved below every layer; kept while
``kgrag/models/pipelines.py``, ``kgrag/models/registry.py``, ``kgrag/api.py`` and
``kgrag/bundle/replay.py`` import from here."""

from kgrag.configuration import default_cache_dir, resolved

__all__ = ["default_cache_dir", "resolved"]
