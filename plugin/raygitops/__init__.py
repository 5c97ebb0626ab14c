"""raygitops: make GitOps changes to KubeRay RayClusters reach their pods."""

__version__ = "0.1.0"
