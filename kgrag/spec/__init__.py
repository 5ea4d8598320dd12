"""The pipeline spec: one YAML file, validated against a JSON Schema, loaded as a ``Spec``.

Everything else in kgrag reads its configuration from a ``Spec``; nothing reads
the YAML directly, so validation and defaults live in exactly one place.
"""

from kgrag.configuration import Spec, thaw
from kgrag.spec.load import check_spec, load_spec

__all__ = ["Spec", "check_spec", "load_spec", "thaw"]
