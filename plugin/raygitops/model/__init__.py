"""The pure model: rules that compute, no I/O (hashing, canonical form, strategy, CRD schema
and defaults, names, plans, pods, verdicts)."""
