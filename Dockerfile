# syntax=docker/dockerfile:1
# One image for both raygitops faces in a cluster:
#   - the Argo CD CMP sidecar (argocd/repo-server-sidecar.yaml overrides the command with
#     /var/run/argocd/argocd-cmp-server, which then runs `raygitops render`);
#   - the PreSync hook Job (`raygitops presync ...`).
# Build: docker build -t raygitops:0.1.0 .   (push it under your registry's name; docs/argocd.md)
#
# Base pinned by exact tag. For a reproducible build also pin the digest of that tag, e.g.
#   docker buildx imagetools inspect python:3.12.8-slim-bookworm   # -> sha256:...
# and write FROM python:3.12.8-slim-bookworm@sha256:<digest> in both stages.
ARG PYTHON_IMAGE=python:3.12.8-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
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

FROM ${PYTHON_IMAGE}
# uid/gid 999: the Argo CD repo-server's user (the CMP socket directory is shared) and the
# hook Job's runAsUser.
RUN groupadd --system --gid 999 raygitops \
 && useradd --system --uid 999 --gid 999 --home-dir /home/raygitops --create-home --shell /usr/sbin/nologin raygitops
COPY --from=build /opt/raygitops /opt/raygitops
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
