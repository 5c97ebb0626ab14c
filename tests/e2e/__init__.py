"""End-to-end tests against a local control plane (a package, so that its conftest is
`e2e.conftest` and does not shadow tests/conftest.py as the module `conftest`)."""
