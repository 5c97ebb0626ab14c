"""The Kubernetes layer: the only code that talks to the API server."""
