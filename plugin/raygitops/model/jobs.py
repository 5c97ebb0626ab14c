"""Running Ray jobs (pure): the policy a RayCluster sets for them, what its head says, and
what a cycle that would take the cluster down does about it (docs/presync.md, "Running
jobs").

Before it suspends a cluster (or, under ReplaceGroups, deletes a group's pods) the hook asks
the cluster's Ray head which jobs are running or pending (Ray's Jobs REST API on the
dashboard port, ``GET /api/jobs/``, through the API server's service proxy), and the
cluster's policy decides:

- ``wait`` (the default): wait for them to end, up to the policy's bound (default: as long
  as the hook's time budget still leaves room for the cycle), then fail closed naming them;
- ``fail``: fail at once naming them, touching nothing;
- ``proceed``: go ahead without asking (their pods go; the jobs with them).

A head pod that is not Ready cannot be running jobs: the cycle goes on and says so. A Ready
head that does not answer (no dashboard, the proxy or the head failing, an answer that is not
Ray's) is *unknown*, which ``wait`` treats as running (it asks again until its bound) and
``fail`` fails on.

The same answers are worded by ``raygitops status`` (live) and ``raygitops diff`` (which has
no cluster: it says the policy and that the hook will ask).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raygitops.errors import closest
from raygitops.model import pods
from raygitops.model.objmeta import meta

WAIT, FAIL, PROCEED = "wait", "fail", "proceed"
POLICIES = (WAIT, FAIL, PROCEED)
WAIT_SECONDS = (1, 86400)  # a policy's bound on the wait, as the hook's own timeout
ACTIVE = ("PENDING", "RUNNING")  # Ray's JobStatus values of a job that has not ended
DASHBOARD_PORT = 8265  # Ray's default (``--dashboard-port``)
DASHBOARD_PORT_NAME = "dashboard"  # the head service's port KubeRay makes for it by default
JOBS_PATH = "api/jobs/"
# where a RayCluster declares the head container's ports (what KubeRay's head Service exposes)
HEAD_PORTS = "spec.headGroupSpec.template.spec.containers[0].ports"

# What the hook saw of a head (HeadJobs.state)
NOT_ASKED = "not-asked"  # the preview, or a decision made before the cycle asks
NO_HEAD = "no-head"
NOT_READY = "not-ready"
ANSWERED = "answered"
UNKNOWN = "unknown"


def parse_policy(value: Any) -> str:
    """``wait``, ``fail`` or ``proceed``; ValueError otherwise, with the policy a slip most
    likely meant (``Wait``, ``fial``)."""
    if isinstance(value, str) and value.strip() in POLICIES:
        return value.strip()
    meant = isinstance(value, str) and (value.strip().lower() if value.strip().lower() in POLICIES
                                        else closest(value.strip(), POLICIES))
    raise ValueError(f"{value!r} is not wait, fail or proceed{f' (did you mean {meant}?)' if meant else ''}")


def parse_wait_seconds(value: Any) -> int:
    """A wait bound in seconds (an integer, or its decimal text); ValueError otherwise."""
    text = value.strip() if isinstance(value, str) else None
    number = int(text) if text is not None and text.isdigit() and len(text) <= 6 else None
    if number is None and isinstance(value, int) and not isinstance(value, bool):
        number = value
    if number is None or not WAIT_SECONDS[0] <= number <= WAIT_SECONDS[1]:
        raise ValueError(f"{value!r} is not a number of seconds from {WAIT_SECONDS[0]} to {WAIT_SECONDS[1]}")
    return number


@dataclass(frozen=True)
class Policy:
    """What a cycle does about running jobs: ``action`` (wait, fail, proceed) and the wait's
    bound (None: as long as the hook's time budget allows)."""

    action: str = WAIT
    wait_seconds: int | None = None

    @property
    def is_default(self) -> bool:
        return self == Policy()

    def words(self) -> str:
        if self.action == PROCEED:
            return "proceed: running jobs are not asked for, their pods go"
        if self.action == FAIL:
            return "fail: the sync fails while a job runs"
        bound = f"up to {self.wait_seconds} s" if self.wait_seconds else "as long as the hook's timeout allows"
        return f"wait for running jobs {bound}, then fail"


@dataclass(frozen=True)
class Dashboard:
    """Where the hook asks a cluster's head: its head Service and the Service's port for the
    dashboard (``port`` None: the Service has none, so no one can ask)."""

    service: str
    port: str | None = DASHBOARD_PORT_NAME

    @property
    def proxy_name(self) -> str:
        """The name the API server's service proxy (and RBAC's resourceNames) takes."""
        return f"{self.service}:{self.port}"


def head_service(cluster: str, spec: dict[str, Any]) -> str:
    """The head Service KubeRay makes for a RayCluster (``GenerateHeadServiceName``, 1.5 and
    1.6): ``headGroupSpec.headService.metadata.name``, else ``<cluster>-head-svc``."""
    head = spec.get("headGroupSpec") if isinstance(spec.get("headGroupSpec"), dict) else {}
    service = head.get("headService") if isinstance(head.get("headService"), dict) else {}
    name = (service.get("metadata") or {}).get("name") if isinstance(service.get("metadata"), dict) else None
    return name if isinstance(name, str) and name else f"{cluster}-head-svc"


def dashboard_port(spec: dict[str, Any]) -> str | None:
    """The head Service's port for the dashboard, as KubeRay names it (``getServicePorts``):
    the head container's ports as declared (an unnamed one is ``<number>-port``), or its
    default ports (``dashboard`` among them) when it declares none; None when it declares
    ports but not the dashboard's (``rayStartParams.dashboard-port``, default 8265)."""
    head = spec.get("headGroupSpec") if isinstance(spec.get("headGroupSpec"), dict) else {}
    params = head.get("rayStartParams") if isinstance(head.get("rayStartParams"), dict) else {}
    try:
        number = int(str(params.get("dashboard-port", DASHBOARD_PORT)))
    except ValueError:
        number = DASHBOARD_PORT
    containers = ((head.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    declared = containers[0].get("ports") if isinstance(containers[0], dict) else None
    if not declared:
        return DASHBOARD_PORT_NAME
    for port in declared:
        if isinstance(port, dict) and port.get("containerPort") == number:
            return port.get("name") or f"{number}-port"
    return None


# ---------------------------------------------------------------------------------------------
# What the head says


@dataclass(frozen=True)
class Job:
    """One job the head reports running or pending."""

    id: str
    status: str
    entrypoint: str
    started: float | None  # seconds since the epoch (Ray reports milliseconds)

    def describe(self, now: float) -> str:
        ran = f" for {duration(now - self.started)}" if self.started is not None else ""
        entry = self.entrypoint if len(self.entrypoint) <= 60 else self.entrypoint[:57] + "..."
        return f"{self.id} ({self.status}{ran}: {entry})"


@dataclass(frozen=True)
class HeadJobs:
    """What the hook (or status) saw of a cluster's head: ``state`` (module constants), the
    jobs not yet ended when it answered, and a detail (the head pod, why it is unknown).
    ``lasting``: an unknown that asking again cannot change (the head Service has no
    dashboard port), so a wait for it would only spend the hook's whole budget."""

    state: str
    jobs: tuple[Job, ...] = ()
    detail: str = ""
    lasting: bool = False

    @property
    def running(self) -> bool:
        return self.state == ANSWERED and bool(self.jobs)

    def to_json(self, now: float) -> dict[str, Any]:
        return {"state": self.state, "detail": self.detail,
                "jobs": [{"id": j.id, "status": j.status, "entrypoint": j.entrypoint,
                          **({"seconds": round(now - j.started)} if j.started is not None else {})}
                         for j in self.jobs]}


NOT_ASKED_YET = HeadJobs(NOT_ASKED)


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 12 s``, ``2 h 05 min``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def head_state(live: dict[str, Any], pod_list: list[dict[str, Any]]) -> HeadJobs | None:
    """What the pods alone tell: no head pod, or a head pod that is not Ready (neither can be
    running a job); None when the head is Ready: ask it."""
    heads = [p for p in pods.own_pods(live, pod_list) if pods.group_key(p) == "head" and not pods.terminating(p)]
    if not heads:
        return HeadJobs(NO_HEAD, detail="no head pod")
    ready = [p for p in heads if pods.ready(p)]
    if not ready:
        return HeadJobs(NOT_READY, detail=f"head pod {meta(heads[0]).get('name', '?')} is not Ready")
    return None


def answered(doc: Any) -> HeadJobs:
    """The head's answer to ``GET /api/jobs/`` (a list of Ray's JobDetails): the jobs not yet
    ended; UNKNOWN when the answer is not that."""
    if not isinstance(doc, list) or not all(isinstance(j, dict) for j in doc):
        return unknown(f"the answer to GET /{JOBS_PATH} is not a list of jobs")
    found = []
    for job in doc:
        status = job.get("status")
        if status not in ACTIVE:
            continue
        ident = job.get("submission_id") or job.get("job_id") or "?"
        started = job.get("start_time")
        found.append(Job(str(ident), str(status), str(job.get("entrypoint") or ""),
                         started / 1000 if isinstance(started, (int, float)) and started > 0 else None))
    return HeadJobs(ANSWERED, tuple(sorted(found, key=lambda j: j.id)))


def unknown(why: str, lasting: bool = False) -> HeadJobs:
    return HeadJobs(UNKNOWN, detail=" ".join(why.split())[:300], lasting=lasting)


def no_dashboard(dashboard: Dashboard) -> HeadJobs:
    return unknown(f"head service {dashboard.service} exposes no dashboard port (declare containerPort "
                   f"{DASHBOARD_PORT} on the head container, or set the policy to proceed)", lasting=True)


# ---------------------------------------------------------------------------------------------
# What a cycle does about it


@dataclass(frozen=True)
class Decision:
    action: str  # PROCEED, WAIT or FAIL
    reason: str
    jobs: tuple[Job, ...] = field(default=())


def listed_jobs(jobs: tuple[Job, ...], now: float, limit: int = 5) -> str:
    shown = ", ".join(j.describe(now) for j in jobs[:limit])
    return shown + (f" and {len(jobs) - limit} more" if len(jobs) > limit else "")


def _running(seen: HeadJobs, now: float) -> str | None:
    """The jobs that hold a cycle back, in words; None when nothing does."""
    if seen.state == ANSWERED and seen.jobs:
        return f"{len(seen.jobs)} Ray job{'s' if len(seen.jobs) != 1 else ''} running: {listed_jobs(seen.jobs, now)}"
    if seen.state == UNKNOWN:
        return f"running jobs unknown: {seen.detail}"
    return None


def decide(policy: Policy, seen: HeadJobs, now: float, waited: float, room: float) -> Decision:
    """What the cycle does now: ``waited`` seconds since it first asked, ``room`` the seconds
    it may still wait (:func:`room`; at most 0: no more)."""
    if policy.action == PROCEED:
        return Decision(PROCEED, "policy proceed: running jobs not asked for")
    if seen.state in (NO_HEAD, NOT_READY):
        return Decision(PROCEED, f"{seen.detail}: no Ray job can be running there")
    what = _running(seen, now)
    if what is None:
        return Decision(PROCEED, "the head reports no running or pending job")
    if policy.action == FAIL:
        return Decision(FAIL, f"{what} (policy fail): not touched", seen.jobs)
    if seen.lasting:
        return Decision(FAIL, f"{what}; waiting cannot change that: not touched")
    if room <= 0:
        bound = (f"the policy's bound of {policy.wait_seconds} s" if policy.wait_seconds is not None
                 and waited >= policy.wait_seconds else "the hook's time budget")
        return Decision(FAIL, f"{what}; waited {duration(waited)}, {bound} is up: not touched", seen.jobs)
    return Decision(WAIT, what, seen.jobs)


def room(policy: Policy, waited: float, budget_left: float) -> float:
    """Seconds the wait may still take: the policy's bound less what was waited, within what
    the hook's time budget leaves after the cycle itself (``budget_left``)."""
    return budget_left if policy.wait_seconds is None else min(budget_left, policy.wait_seconds - waited)


def outlook(policy: Policy, seen: HeadJobs, now: float) -> str:
    """What the next sync does about jobs, in words (``raygitops status`` with what the head
    says now, ``raygitops diff`` with NOT_ASKED)."""
    if policy.action == PROCEED:
        return "running jobs: not asked for (policy proceed)"
    if seen.state == NOT_ASKED:
        return f"running jobs: the hook asks the head first ({policy.words()})"
    what = _running(seen, now)
    if what is None:
        return f"running jobs: none ({decide(policy, seen, now, 0.0, 1.0).reason})"
    then = "fails" if policy.action == FAIL or seen.lasting else "waits for them " + (
        f"up to {policy.wait_seconds} s" if policy.wait_seconds else "as long as its timeout allows") + ", then fails"
    return f"{what}: the next sync {then}"
