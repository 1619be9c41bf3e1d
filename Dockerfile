# syntax=docker/dockerfile:1
# rulevalidator in a distroless image: a static binary, no shell, running as
# the unprivileged "nonroot" user (uid 65532).
#
#   docker build -t rulevalidator:v0.1.0 \
#     --build-arg VERSION=v0.1.0 \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg BUILD_TIME="$(git log -1 --format=%cI)" .
#   docker run --rm rulevalidator:v0.1.0 version
#
# .git is not in the build context (.dockerignore), so the Go toolchain cannot
# record the revision: the build arguments are stamped into the binary instead
# (internal/buildinfo; docs/operations.md, "Releases, images and Helm").
# BUILD_TIME is the revision's commit time, so that two builds of one revision
# say the same. Without them `version` says (devel) and revision unknown.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=""
ARG REVISION=""
ARG BUILD_TIME=""
ARG MODIFIED=""
# Static, so that it runs without a libc; -trimpath keeps build paths out of
# the binary; -buildvcs=false, as there is no .git to read. The binary then
# prints its version, which fails the build on a stamp that does not parse.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w \
      -X rulevalidator/internal/buildinfo.version=${VERSION} \
      -X rulevalidator/internal/buildinfo.revision=${REVISION} \
      -X rulevalidator/internal/buildinfo.revisionTime=${BUILD_TIME} \
      -X rulevalidator/internal/buildinfo.modified=${MODIFIED}" \
      -o /out/rulevalidator ./cmd/rulevalidator \
    && /out/rulevalidator version

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=""
ARG REVISION=""
ARG BUILD_TIME=""
# The same values where registries and scanners look for them.
LABEL org.opencontainers.image.title="rulevalidator" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${BUILD_TIME}"
COPY --from=build /src/LICENSE /src/NOTICE /usr/share/doc/rulevalidator/
COPY --from=build /out/rulevalidator /usr/local/bin/rulevalidator
# Public API and the ops listener (/metrics, /healthz, /readyz).
EXPOSE 8080 9464
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/rulevalidator"]
CMD ["serve"]
