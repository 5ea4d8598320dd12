"""The pipeline spec: one YAML file, validated against a JSON Schema, loaded as a ``Spec``.

Everything else in kgrag reads its configuration from a ``Spec``; nothing reads
the YAML directly, so validation and defaults live in exactly one place.
"""

from kgrag.spec.load import check_spec, load_spec
from kgrag.spec.model import Spec, thaw

__all__ = ["Spec", "check_spec", "load_spec", "thaw"]
