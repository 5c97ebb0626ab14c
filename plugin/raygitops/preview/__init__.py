"""The preview face of raygitops: ``raygitops diff`` renders two revisions of an app and
reports, per RayCluster, what a merge will do to its pods.

Layout: :mod:`revisions` (I/O: a side → a rendered app), :mod:`changes` and :mod:`impact`
(pure: field changes, classes), ``report_*`` (pure formatting), :mod:`command` (the CLI).
"""
