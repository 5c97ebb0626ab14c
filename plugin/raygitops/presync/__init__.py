"""The PreSync hook (``raygitops presync``): recreate drifted, opted-in RayClusters.

Modules: ``command`` (CLI), ``run`` (one run over the plan), ``drift`` (pure decisions),
``defaults`` (CRD default stripping), ``lock`` (lock/lease annotation), ``patches`` (merge
patches), ``cycle`` (the recreate state machine), ``events``, ``logs``, ``credentials``
(the pod's ServiceAccount, or a kubeconfig), and ``kubeapi`` — the only module that talks to
the API server.  Only ``credentials`` imports ``kubernetes``, and only for a kubeconfig.
"""
