"""Nothing a kgrag run loads may reach the network: the toolkit works offline, from files.

Two kinds of library would otherwise try. Hugging Face's loaders look a model up on the
hub unless told they are offline (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``; every
model kgrag loads is a local folder). And OpenVINO reports usage to Google Analytics:
``import openvino`` sends an event from a forked process (the fork that made lancedb warn
about ``fork()`` in ``kgrag query``), and NNCF's quantisation sends more, unless a
consent file in the user's home says no; the first send also writes a client id and a
usage count under ``~/intel``. kgrag declines for its own process only, before either
library is imported, and leaves the user's consent file (OpenVINO's ``opt_in_out``) as
it is.
"""

from __future__ import annotations

import os
from typing import Any


def offline() -> None:
    """Tell the libraries kgrag is about to import that they must not go online; call it
    before importing transformers, sentence-transformers, OpenVINO or NNCF."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from openvino_telemetry.utils.opt_in_checker import ConsentCheckResult, OptInChecker
    except ImportError:  # no OpenVINO installed: nothing to decline
        return

    def declined(self: Any, enable_opt_in_dialog: bool, disable_in_ci: bool = False) -> Any:
        return ConsentCheckResult.DECLINED

    OptInChecker.check = declined  # type: ignore[method-assign]
