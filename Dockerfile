# syntax=docker/dockerfile:1
# One image for both raygitops faces in a cluster:
#   - the Argo CD CMP sidecar (argocd/repo-server-sidecar.yaml overrides the command with
#     /var/run/argocd/argocd-cmp-server, which then runs `raygitops render`; a Helm chart or a
#     kustomization app is rendered with the helm and kustomize this image carries);
#   - the PreSync hook Job (`raygitops presync ...`).
# Build: docker build -t raygitops:0.1.0 .   (push it under your registry's name; docs/argocd.md)
#
# Bases pinned by exact tag. For a reproducible build also pin the digest of each tag, e.g.
#   docker buildx imagetools inspect python:3.12.8-slim-bookworm   # -> sha256:...
# and write FROM python:3.12.8-slim-bookworm@sha256:<digest>.
ARG PYTHON_IMAGE=python:3.12.8-slim-bookworm
# helm and kustomize, built from the Go module proxy: `go install` checks every module against
# go.sum and sum.golang.org, and the build stage checks the binaries name the pinned module at
# its pinned hash (scripts/check_go_binary.py). The versions are tests/e2e/versions.env's
# (tests/unit/test_ship_docker.py keeps them one); the Go release is the one the tests build with.
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG HELM_VERSION=v4.3.2
ARG HELM_MODULE_SUM=h1:zdd8DgKTlLrlYIzdoAntDHLH0V3RkgNIpQ3yjzuD84M=
ARG KUSTOMIZE_VERSION=v5.8.1
ARG KUSTOMIZE_MODULE_SUM=h1:Pgsg5psubpVEy7Nf6S89PARg5VmmWUC1l9dC6Dl4PG0=

# The `tools` stage builds helm and kustomize. A build without a Go image to pull (this
# repository's tests: tests/image/build.sh) replaces the stage with a build context of the
# same name holding tools/helm and tools/kustomize (`--build-context tools=DIR`, which Docker's
# BuildKit and Buildah both take over a stage so named): the binaries tests/e2e/build.sh built
# from the same modules with the same flags. The build stage checks them against the same pins
# either way.
FROM ${GO_IMAGE} AS tools
ARG HELM_VERSION
ARG KUSTOMIZE_VERSION
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
RUN GOBIN=/tools go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" \
      "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}" \
 && GOBIN=/tools go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@${KUSTOMIZE_VERSION}"

FROM ${PYTHON_IMAGE} AS build
ARG HELM_VERSION
ARG HELM_MODULE_SUM
ARG KUSTOMIZE_VERSION
ARG KUSTOMIZE_MODULE_SUM
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the wheel needs and the lock of its dependencies (see .dockerignore).
COPY pyproject.toml README.md LICENSE ./
COPY requirements/runtime.txt requirements/
COPY plugin/ plugin/
# /opt/raygitops gets no pip and no setuptools: a throwaway venv (/tools) holds the installer.
# The dependencies go in exactly as locked (versions and hashes: requirements/lock.sh), then
# the wheel without dependencies (PyPI wheels: PyYAML's manylinux wheel bundles libyaml, so
# no compiler and no -dev packages are needed).
RUN python -m venv /tools \
 && python -m venv --without-pip /opt/raygitops \
 && /tools/bin/pip --python /opt/raygitops/bin/python install --require-hashes --no-deps -r requirements/runtime.txt \
 && /tools/bin/pip wheel --no-deps --wheel-dir /wheels . \
 && /tools/bin/pip --python /opt/raygitops/bin/python install --no-deps /wheels/raygitops-*.whl
# The kubernetes client (37.x in the lock) ships a second, asyncio copy of its whole client (kubernetes/aio, ~70 MB
# with pyc) that raygitops never imports (the hook uses kubernetes.config + urllib3 only).
RUN rm -rf /opt/raygitops/lib/python3*/site-packages/kubernetes/aio
# Render speed depends on the libyaml C loader/dumper: fail the build without it.
RUN /opt/raygitops/bin/python -c "import yaml, sys; sys.exit(0 if yaml.__with_libyaml__ else 'PyYAML is built without libyaml')" \
 && /opt/raygitops/bin/raygitops --version
# helm and kustomize, whichever way they came: the pinned module at its pinned hash, and they run.
COPY scripts/check_go_binary.py /src/
COPY --from=tools /tools/helm /tools/kustomize /opt/bin/
RUN python /src/check_go_binary.py /opt/bin/helm helm.sh/helm/v4 "${HELM_VERSION}" "${HELM_MODULE_SUM}" \
 && python /src/check_go_binary.py /opt/bin/kustomize sigs.k8s.io/kustomize/kustomize/v5 "${KUSTOMIZE_VERSION}" "${KUSTOMIZE_MODULE_SUM}" \
 && test "$(/opt/bin/helm version --template '{{.Version}}')" = "${HELM_VERSION}" \
 && test "$(/opt/bin/kustomize version)" = "${KUSTOMIZE_VERSION}"

FROM ${PYTHON_IMAGE}
# uid/gid 999: the Argo CD repo-server's user (the CMP socket directory is shared) and the
# hook Job's runAsUser.
RUN groupadd --system --gid 999 raygitops \
 && useradd --system --uid 999 --gid 999 --home-dir /home/raygitops --create-home --shell /usr/sbin/nologin raygitops
COPY --from=build /opt/raygitops /opt/raygitops
COPY --from=build /opt/bin/helm /opt/bin/kustomize /usr/local/bin/
# The plugin definition where the sidecar mounts it (argocd/repo-server-sidecar.yaml): the
# image alone is a working CMP sidecar; the ConfigMap mount replaces it with the same file.
COPY argocd/plugin.yaml /home/argocd/cmp-server/config/plugin.yaml
ENV PATH=/opt/raygitops/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 999:999
WORKDIR /home/raygitops
# Exec form: no shell at run time.
ENTRYPOINT ["raygitops"]
CMD ["--help"]
