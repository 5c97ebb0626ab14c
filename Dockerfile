# syntax=docker/dockerfile:1
# One image for both raygitops faces in a cluster:
#   - the Argo CD CMP sidecar (argocd/repo-server-sidecar.yaml overrides the command with
#     /var/run/argocd/argocd-cmp-server, which then runs `raygitops render`);
#   - the PreSync hook Job (`raygitops presync ...`).
# Build: docker build -t ghcr.io/raygitops/raygitops:0.1.0 .
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
# The dependencies exactly as locked (versions and hashes: requirements/lock.sh), then the
# wheel without dependencies (PyPI wheels: PyYAML's manylinux wheel bundles libyaml, so no
# compiler and no -dev packages are needed).
RUN python -m venv /opt/raygitops \
 && /opt/raygitops/bin/python -m pip install --require-hashes --no-deps -r requirements/runtime.txt \
 && /opt/raygitops/bin/python -m pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/raygitops/bin/python -m pip install --no-deps /wheels/raygitops-*.whl
# Render speed depends on the libyaml C loader/dumper: fail the build without it.
RUN /opt/raygitops/bin/python -c "import yaml, sys; sys.exit(0 if yaml.__with_libyaml__ else 'PyYAML is built without libyaml')" \
 && /opt/raygitops/bin/raygitops --version

FROM ${PYTHON_IMAGE}
# uid/gid 999: the Argo CD repo-server's user (the CMP socket directory is shared) and the
# hook Job's runAsUser.
RUN groupadd --system --gid 999 raygitops \
 && useradd --system --uid 999 --gid 999 --home-dir /home/raygitops --create-home --shell /usr/sbin/nologin raygitops
COPY --from=build /opt/raygitops /opt/raygitops
ENV PATH=/opt/raygitops/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 999:999
WORKDIR /home/raygitops
# Exec form: no shell at run time.
ENTRYPOINT ["raygitops"]
CMD ["--help"]
