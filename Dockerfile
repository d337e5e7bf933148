# syntax=docker/dockerfile:1
#
# The kube-tas image: the release binary on distroless (glibc, CA certificates, no shell, no
# package manager), run as the image's nonroot user.
#
#   docker build -t ghcr.io/kube-tas/kube-tas:0.1.0 .
#
# BuildKit (the default builder of current Docker) keeps the cargo registry and the target folder
# in cache mounts between builds, so a rebuild after a source change compiles kube-tas alone.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The target folder is a cache mount, gone after this step: the binary is copied out of it.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kube-tas \
    && cp target/release/kube-tas /kube-tas

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kube-tas /kube-tas
# uid 65532; manifests/base/deployment.yaml states the same uid as runAsUser, since the kubelet
# can only check runAsNonRoot against a numeric user.
USER nonroot
# mimalloc gives a freed page back to the kernel once it has been free this many milliseconds
# (its default is 1,000): what the initial lists of a big cluster freed is returned within the
# first requests after ready instead of staying resident. 50 ms keeps 5,000 nodes / 50,000 pods
# at about 55 MiB instead of 61-70, with the same time to ready (BENCHMARKS.md, G8).
# manifests/base/deployment.yaml sets the same value, for images built otherwise.
ENV MIMALLOC_PURGE_DELAY=50
# 8443: extender and webhook (TLS); 8080: /healthz, /readyz, /metrics.
EXPOSE 8443 8080
ENTRYPOINT ["/kube-tas"]
