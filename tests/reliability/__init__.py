"""Reliability and security campaigns (see docs/reliability.md)."""
