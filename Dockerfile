# syntax=docker/dockerfile:1
# rulevalidator in a distroless image: a static binary, no shell, running as
# the unprivileged "nonroot" user (uid 65532).
#
#   docker build -t rulevalidator .
#   docker run --rm rulevalidator validate --help

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static, so that it runs without a libc; -trimpath keeps build paths out of
# the binary. .git is not copied (.dockerignore), hence -buildvcs=false.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" \
      -o /out/rulevalidator ./cmd/rulevalidator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/rulevalidator /usr/local/bin/rulevalidator
# Public API and the ops listener (/metrics, /healthz, /readyz).
EXPOSE 8080 9464
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/rulevalidator"]
CMD ["serve"]
