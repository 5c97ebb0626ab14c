"""``raygitops status``: Git against the live cluster, per RayCluster of an app.

Layout: :mod:`live` (I/O: reads the cluster), :mod:`assess` (pure: one cluster's status),
:mod:`report` (pure formatting), :mod:`command` (the CLI).
"""
