"""ray-operator v1.1.1 and v1.2.2: no ``ValidateRayClusterSpec`` (it arrived in 1.3's
``controllers/ray/utils/validation.go``); their reconciler builds pods for any spec the CRD
schema accepts, so nothing is refused beyond the schema."""

from __future__ import annotations

from raygitops.model.validation import Port

PORT = Port(tag="v1.1.1", gates=frozenset(), steps=())
