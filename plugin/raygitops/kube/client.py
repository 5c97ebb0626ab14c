"""The ONLY module of the hook that talks to the API server.

Credentials come from :mod:`raygitops.kube.credentials`.  Requests go through one urllib3 pool with plain JSON dicts in and out, so
that the hook controls retries and watch streams and never pays for model deserialisation
of a thousand pods.

Retries: 429 (honouring ``Retry-After``), 500/502/503/504 and connection errors, with a
capped, jittered exponential backoff.  409 is NOT retried here: the caller re-reads and
recomputes its change (:class:`Conflict`).  Every request is counted (``requests``): the
summary reports it, the benchmark reads it.
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any, Iterator
from urllib.parse import quote, urlencode

import urllib3

from raygitops.kube.credentials import Credentials

RAY_GROUP = "ray.io"
RAY_VERSION = "v1"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_ATTEMPTS = 8
BACKOFF_CAP_SECONDS = 8.0
REQUEST_TIMEOUT_SECONDS = 30.0
PROXY_TIMEOUT_SECONDS = 10.0  # a GET through a service proxy (a Ray head's dashboard)
AFTER_DEADLINE_TIMEOUT_SECONDS = 10.0  # each call of the resume that follows a timeout
USER_AGENT = "raygitops-presync"


class ApiError(Exception):
    """A non-2xx answer (after retries)."""

    def __init__(self, status: int, reason: str, message: str, method: str = "", path: str = ""):
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message


class Conflict(ApiError):
    """409: the object changed since it was read (resourceVersion precondition)."""


class NotFound(ApiError):
    """404."""


class Gone(ApiError):
    """410: a watch resourceVersion is too old; list again."""


class StreamBroken(ApiError):
    """A watch stream that dropped or sent a line that is not a JSON event; list again."""


def _error(status: int, body: bytes, method: str, path: str) -> ApiError:
    reason, message = "", ""
    try:
        doc = json.loads(body or b"{}")
        reason, message = doc.get("reason", ""), doc.get("message", "")
    except (ValueError, AttributeError):
        message = (body or b"")[:200].decode(errors="replace")
    cls = {409: Conflict, 404: NotFound, 410: Gone}.get(status, ApiError)
    return cls(status, reason, message, method, path)


def _watch_event(line: bytes, path: str) -> tuple[str, dict[str, Any]]:
    """(type, object) of one watch line; a line that is not a watch event (truncated,
    garbled) breaks the stream."""
    try:
        event = json.loads(line)
    except ValueError:
        event = None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str) or not isinstance(event.get("object"), dict):
        raise StreamBroken(0, "StreamBroken", f"not a watch event: {line[:80]!r}", "WATCH", path)
    return event["type"], event["object"]


def _retry_after(headers: Any, attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1``: Retry-After as the minimum."""
    backoff = min(BACKOFF_CAP_SECONDS, 0.2 * (2**attempt)) * (0.5 + random.random() / 2)
    value = headers.get("Retry-After") if headers is not None else None
    if value:
        try:
            return max(backoff, min(float(value), 60.0))
        except ValueError:
            pass
    return backoff


class Kube:
    """A tiny JSON client for the handful of calls the hook makes."""

    def __init__(self, creds: Credentials, pool_size: int = 8, deadline: float | None = None):
        """``deadline``: the ``time.monotonic()`` instant of the run's ``--timeout``; no single
        call outlives it (None: each call has its own timeout only)."""
        self.creds = creds
        pool: dict[str, Any] = dict(num_pools=4, maxsize=pool_size, block=False, ssl_context=creds.ssl_context,
                                    cert_reqs="CERT_REQUIRED" if creds.verify else "CERT_NONE", retries=False)
        if creds.server_name:
            pool.update(server_hostname=creds.server_name, assert_hostname=creds.server_name)
        self.http = (urllib3.ProxyManager(creds.proxy, **pool) if creds.proxy  # CONNECT tunnel, as kubectl
                     else urllib3.PoolManager(**pool))
        self._count_lock = threading.Lock()
        self.deadline = deadline
        self.requests = 0
        self.by_verb: dict[str, int] = {}

    # ------------------------------------------------------------------ plumbing

    def _headers(self, content_type: str | None = None, accept: str = "application/json") -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": USER_AGENT}
        token = self.creds.token()
        if token:
            headers["Authorization"] = token
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _count(self, verb: str) -> None:
        with self._count_lock:
            self.requests += 1
            self.by_verb[verb] = self.by_verb.get(verb, 0) + 1

    def request(self, method: str, path: str, query: dict[str, Any] | None = None, body: Any = None,
                content_type: str | None = None, timeout: float = REQUEST_TIMEOUT_SECONDS,
                stream: bool = False, verb: str | None = None, attempts: int = MAX_ATTEMPTS,
                accept: str = "application/json") -> Any:
        """One API call with retries (at most ``attempts`` tries); the parsed JSON answer (or
        the raw response when ``stream``)."""
        url = self.creds.host + path
        if query:
            url += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(attempts):
            self._count(verb or method)
            read = self._bounded(timeout)
            try:
                resp = self.http.request(
                    method, url, body=data, headers=self._headers(content_type, accept),
                    timeout=urllib3.Timeout(connect=min(10, read), read=read), preload_content=not stream,
                    redirect=False,
                )
            except (urllib3.exceptions.HTTPError, OSError) as err:
                if attempt + 1 == attempts:
                    raise ApiError(0, "ConnectionError", str(err), method, path) from None
                time.sleep(_retry_after(None, attempt))
                continue
            if 200 <= resp.status < 300:
                if stream:
                    return resp
                return json.loads(resp.data) if resp.data else {}
            payload = resp.data if not stream else resp.read()
            if stream:
                resp.release_conn()
            if resp.status in RETRY_STATUSES and attempt + 1 < attempts:
                time.sleep(_retry_after(resp.headers, attempt))
                continue
            raise _error(resp.status, payload, method, path)
        raise AssertionError("unreachable")

    def _bounded(self, timeout: float) -> float:
        """The read timeout of one call: never past the run's deadline; after it (resuming a
        cluster after a timeout), short calls only."""
        if self.deadline is None:
            return timeout
        left = self.deadline - time.monotonic()
        return min(timeout, left if left > 1 else AFTER_DEADLINE_TIMEOUT_SECONDS)

    # ------------------------------------------------------------------ RayClusters

    @staticmethod
    def _clusters(namespace: str, name: str | None = None) -> str:
        path = f"/apis/{RAY_GROUP}/{RAY_VERSION}/namespaces/{quote(namespace)}/rayclusters"
        return path + (f"/{quote(name)}" if name else "")

    def list_clusters(self, namespace: str) -> list[dict[str, Any]]:
        return self.request("GET", self._clusters(namespace), verb="list").get("items") or []

    def get_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.request("GET", self._clusters(namespace, name), verb="get")
        except NotFound:
            return None

    def watch_cluster(self, namespace: str, name: str, resource_version: str,
                      timeout_seconds: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """One RayCluster's changes after ``resource_version`` (:meth:`_watch`; the
        collection narrowed by ``metadata.name``, which every resource can be selected by)."""
        return self._watch(self._clusters(namespace), {"fieldSelector": f"metadata.name={name}"},
                           resource_version, timeout_seconds)

    def patch_cluster(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch; a ``metadata.resourceVersion`` in it is a precondition (409)."""
        return self.request("PATCH", self._clusters(namespace, name), body=patch,
                            content_type="application/merge-patch+json", verb="patch")

    def knows_upgrade_strategy(self, namespace: str, name: str) -> bool:
        """Whether the live RayCluster CRD has ``spec.upgradeStrategy`` (KubeRay >= 1.6): a
        server-side dry run (nothing is stored) setting it on an existing RayCluster with
        strict field validation, which a CRD without the field refuses.  It needs only the
        Role's ``patch``, where reading the CRD would need a ClusterRole."""
        try:
            self.request("PATCH", self._clusters(namespace, name), {"dryRun": "All", "fieldValidation": "Strict"},
                         body={"spec": {"upgradeStrategy": {"type": "Recreate"}}},
                         content_type="application/merge-patch+json", verb="dry-run")
        except ApiError as err:
            if err.status in (400, 422) and "upgradeStrategy" in err.message:
                return False
            raise
        return True

    def get_raycluster_crd(self) -> dict[str, Any] | None:
        """The RayCluster CRD (``raygitops status`` reads its schema; the hook has no right to)."""
        try:
            return self.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rayclusters.ray.io",
                                verb="get")
        except NotFound:
            return None

    def annotate_job(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        """Merge ``annotations`` into a Job's metadata."""
        self.request("PATCH", f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs/{quote(name)}",
                     body={"metadata": {"annotations": annotations}},
                     content_type="application/merge-patch+json", verb="patch")

    # ------------------------------------------------------------------ configmaps, secrets

    @staticmethod
    def _core(resource: str, namespace: str, name: str | None = None) -> str:
        path = f"/api/v1/namespaces/{quote(namespace)}/{resource}"
        return path + (f"/{quote(name)}" if name else "")

    def get_core(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A namespaced core/v1 object (``configmaps``, ``secrets``), None when absent."""
        try:
            return self.request("GET", self._core(resource, namespace, name), verb="get")
        except NotFound:
            return None

    def create_core(self, resource: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", self._core(resource, namespace), body=body, content_type="application/json",
                            verb="create")

    def patch_core(self, resource: str, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch; a ``metadata.resourceVersion`` in it is a precondition (409)."""
        return self.request("PATCH", self._core(resource, namespace, name), body=patch,
                            content_type="application/merge-patch+json", verb="patch")

    # ------------------------------------------------------------------ what the preflight reads

    def exists(self, api: str, resource: str, name: str, namespace: str | None = None) -> bool:
        """Whether an object exists (``api``: ``api/v1``, ``apis/scheduling.k8s.io/v1``; a
        namespaced one when ``namespace`` is given). Its metadata only is fetched: the
        preflight never holds a Secret's content. A 403 is an :class:`ApiError`."""
        where = f"/namespaces/{quote(namespace)}" if namespace is not None else ""
        try:
            self.request("GET", f"/{api}{where}/{resource}/{quote(name)}", verb="get",
                         accept="application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
            return True
        except NotFound:
            return False

    def list_nodes(self) -> list[dict[str, Any]]:
        return self.request("GET", "/api/v1/nodes", verb="list").get("items") or []

    def get_node(self, name: str) -> dict[str, Any] | None:
        try:
            return self.request("GET", f"/api/v1/nodes/{quote(name)}", verb="get")
        except NotFound:
            return None

    # ------------------------------------------------------------------ any namespaced object

    @staticmethod
    def _object(group: str, resource: str, namespace: str, name: str) -> str:
        """The path of a namespaced object of a v1 API group (core, batch, rbac...)."""
        base = "/api/v1" if group == "" else f"/apis/{group}/v1"
        return f"{base}/namespaces/{quote(namespace)}/{resource}/{quote(name)}"

    def get_object(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.request("GET", self._object(group, resource, namespace, name), verb="get")
        except NotFound:
            return None

    def delete_object(self, group: str, resource: str, namespace: str, name: str, uid: str | None = None) -> bool:
        """Delete one object (only that UID, when given), its dependents in the background
        (a Job's pods); False when it is already gone or is another object now."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", self._object(group, resource, namespace, name), body=body,
                         content_type="application/json", verb="delete")
            return True
        except (NotFound, Conflict):
            return False

    # ------------------------------------------------------------------ services

    def get_through_service(self, namespace: str, service: str, path: str) -> Any:
        """GET ``path`` of a Service through the API server's service proxy
        (``services/<service>/proxy``, ``service`` being ``name:port``): the parsed JSON
        answer. Short and tried twice at most (whoever asks asks again later); a non-2xx is an
        :class:`ApiError` (503 when the Service has no endpoint or the backend cannot be
        reached), an answer that is not JSON a ``ValueError``."""
        return self.request("GET", f"{self._core('services', namespace, None)}/{quote(service, safe=':')}/proxy/{path}",
                            timeout=PROXY_TIMEOUT_SECONDS, verb="proxy", attempts=2)

    # ------------------------------------------------------------------ pods

    @staticmethod
    def _pods(namespace: str, name: str | None = None) -> str:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods"
        return path + (f"/{quote(name)}" if name else "")

    def list_pods(self, namespace: str, selector: str) -> tuple[list[dict[str, Any]], str]:
        """Pods matching a label selector and the list's resourceVersion (to watch from)."""
        doc = self.request("GET", self._pods(namespace), {"labelSelector": selector}, verb="list")
        return doc.get("items") or [], (doc.get("metadata") or {}).get("resourceVersion", "")

    def watch_pods(self, namespace: str, selector: str, resource_version: str,
                   timeout_seconds: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """The pods matching a label selector, changed after ``resource_version`` (:meth:`_watch`)."""
        return self._watch(self._pods(namespace), {"labelSelector": selector}, resource_version, timeout_seconds)

    # ------------------------------------------------------------------ watches

    def _watch(self, path: str, query: dict[str, str], resource_version: str,
               timeout_seconds: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, object) events of the collection at ``path`` after ``resource_version``,
        until the server closes the stream after ``timeout_seconds``; BOOKMARK events carry
        only a resourceVersion.  Raises :class:`Gone` when ``resource_version`` is too old
        (the caller reads again) and :class:`StreamBroken` when the stream drops."""
        query = {**query, "watch": "1", "allowWatchBookmarks": "true",
                 "resourceVersion": resource_version, "timeoutSeconds": str(max(1, int(timeout_seconds)))}
        resp = self.request("GET", path, query, stream=True, timeout=timeout_seconds + 15, verb="watch")
        complete = False
        try:
            for line in resp:
                if not line.strip():
                    continue
                kind, obj = _watch_event(line, path)
                if kind == "ERROR":
                    raise _error(int(obj.get("code") or 500), json.dumps(obj).encode(), "WATCH", path)
                yield kind, obj
            complete = True
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise StreamBroken(0, "StreamBroken", f"watch stream dropped: {err}", "WATCH", path) from None
        finally:
            if not complete:
                resp.close()  # unread stream: never hand this connection to the next request
            resp.release_conn()

    def delete_pod(self, namespace: str, name: str, uid: str | None = None,
                   grace_seconds: int | None = None) -> bool:
        """Delete one pod (only that UID; by default with the pod's own grace period); False
        when it is already gone."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", self._pods(namespace, name), body=body,
                         content_type="application/json", verb="delete")
            return True
        except (NotFound, Conflict):
            return False  # gone, or a new pod with that name (not ours to delete)

    # ------------------------------------------------------------------ events

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        self.request("POST", f"/api/v1/namespaces/{quote(namespace)}/events", body=event,
                     content_type="application/json", verb="create")
