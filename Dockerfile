# syntax=docker/dockerfile:1
# The jobrelay controller image (the chart runs it: its entrypoint is `jobrelay`, args `run ...`).
#
#   make image                      (docker, podman or buildah; docs/release.md), which runs
#   docker build -t jobrelay:X.Y.Z --build-arg VERSION=X.Y.Z --build-arg REVISION="$(git rev-parse HEAD)" .
#   with X.Y.Z the release's one version (src/jobrelay/__init__.py).
#
# Two stages: the builder installs the hash-checked versions of requirements/runtime.lock and
# a wheel of jobrelay into a venv without pip; the final stage copies only that venv. No dev
# tooling and no local-fleet code (jobrelay.localfleet: etcd, kube-apiserver and KWOK run by
# `jobrelay fleet`) are in it; `jobrelay fleet` and `jobrelay demo` say so in one line.
#
# The base is pinned by digest (the multi-arch index of python:3.11-slim-bookworm, Python
# 3.11.16). To refresh it, read the tag's current digest and replace the one below:
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{json .Manifest.Digest}}'
# (or `crane digest python:3.11-slim-bookworm`), then rebuild and run the tests.
ARG BASE_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

FROM ${BASE_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /build
# The build backend (setuptools, wheel), hash-checked, in the builder's own Python only.
COPY requirements/build.lock requirements/runtime.lock requirements/
RUN python -m pip install --require-hashes --no-deps -r requirements/build.lock
# The venv the image runs: the runtime lock's versions, hash-checked, then jobrelay's wheel.
RUN python -m venv --without-pip /opt/jobrelay \
 && python -m pip --python /opt/jobrelay/bin/python install \
      --require-hashes --no-deps -r requirements/runtime.lock
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
# src/jobrelay/manifests/ links into charts/ (the CRDs, the manifests' data): the wheel copies them in.
COPY charts ./charts
RUN python -m pip wheel --no-build-isolation --no-deps --wheel-dir /wheels . \
 && python -m pip --python /opt/jobrelay/bin/python install --no-deps /wheels/jobrelay-*.whl \
 && python -m pip --python /opt/jobrelay/bin/python check \
 && rm -rf /opt/jobrelay/lib/python3.11/site-packages/jobrelay/localfleet \
 && /opt/jobrelay/bin/jobrelay --version

FROM ${BASE_IMAGE}
# `make image` passes the release's version.
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="jobrelay" \
      org.opencontainers.image.description="Multi-cluster batch dispatcher for Kubernetes workloads (spec.managedBy): Jobs, JobSets, any CRD" \
      org.opencontainers.image.source="https://github.com/jobrelay/jobrelay" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=builder /opt/jobrelay /opt/jobrelay
# Bytecode was compiled in the builder; the chart's root filesystem is read-only.
ENV PATH=/opt/jobrelay/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# 65532: the chart's runAsUser/runAsGroup (distroless's nonroot); no passwd entry needed.
USER 65532:65532
ENTRYPOINT ["jobrelay"]
CMD ["--help"]
