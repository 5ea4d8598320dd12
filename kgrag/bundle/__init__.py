"""Replayable bundles: a finished run as one file (``pack``), checked and replayed offline
on another machine (``replay``, ``compare``; the run itself is ``kgrag.api.replay``)."""
