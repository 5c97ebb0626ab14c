"""The PreSync hook (``raygitops presync``): recreate drifted, opted-in RayClusters.

Modules: ``command`` (CLI), ``run`` (one run over the plan: the verdict per cluster, from
:mod:`raygitops.model.verdict`, then the cycles), ``cycle`` (the recreate state machine),
``drain``, ``replace`` (ReplaceGroups' batches), ``configlive``, ``patches`` (merge
patches), ``prompt`` (the operator's suspend conditions), ``budget``, ``events``, ``logs``,
``planfiles``. The API server is reached only through :mod:`raygitops.kube`.
"""
