"""Which objects live in a namespace (pure).

The API server knows each kind's scope from its discovery; render has no API server, so it
knows the cluster-scoped kinds of Kubernetes itself (and of the usual add-ons) by name, and
takes every other kind, custom resources included, for namespaced, as kustomize's
``namespace:`` does.  Render sets the namespace of a namespaced object that names none
(``raygitops.yaml``'s ``namespace``, Argo CD's destination, else ``default``), and
``--output-dir`` files cluster-scoped ones apart.
"""

from __future__ import annotations

from typing import Any

CLUSTER_SCOPED_KINDS = frozenset(
    {
        # core, admission, API extension and registration
        "Namespace", "Node", "PersistentVolume", "ComponentStatus",
        "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
        "CustomResourceDefinition", "APIService",
        # authentication and authorization reviews, certificates
        "TokenReview", "SelfSubjectReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview",
        "SubjectAccessReview", "CertificateSigningRequest", "ClusterTrustBundle",
        # RBAC, scheduling, flow control, networking, node, storage, dynamic resources
        "ClusterRole", "ClusterRoleBinding", "PriorityClass", "FlowSchema", "PriorityLevelConfiguration",
        "IngressClass", "IPAddress", "ServiceCIDR", "RuntimeClass", "PodSecurityPolicy",
        "StorageClass", "VolumeAttachment", "CSIDriver", "CSINode", "VolumeAttributesClass",
        "DeviceClass", "ResourceSlice", "StorageVersionMigration", "StorageVersion",
        # common add-ons: cert-manager, volume snapshots
        "ClusterIssuer", "VolumeSnapshotClass", "VolumeSnapshotContent",
    }
)


def namespaced(obj: Any) -> bool:
    """Whether ``obj`` (a Kubernetes object) lives in a namespace."""
    return not (isinstance(obj, dict) and obj.get("kind") in CLUSTER_SCOPED_KINDS)
