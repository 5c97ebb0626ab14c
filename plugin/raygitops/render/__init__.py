"""Rendering: an app's documents to manifests with hashes, the hook objects and the plan."""
