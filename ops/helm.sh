#!/usr/bin/env bash
# Helm (Apache-2.0), built once from the Go module proxy with `go install` and cached: the tests
# lint and render the chart in ops/helm/rulevalidator with it.
#
#   ops/helm.sh install   build helm into the cache (once per version)
#   ops/helm.sh path      print the cached binary's path (exit 1 when it is not installed)
#
# Env: HELM_VERSION (v4.3.2; the module path follows its major version, so a v3 release such as
#      v3.21.4 can be named too), RULEVALIDATOR_CACHE.
# Binary: $RV_CACHE/helm/<version>/helm. Build log: $RV_CACHE/helm/install.log.
set -euo pipefail
OPS="$(cd "$(dirname "$0")" && pwd)"
. "$OPS/lib.sh"

HELM_VERSION="${HELM_VERSION:-v4.3.2}"
[[ "$HELM_VERSION" =~ ^v([0-9]+)\.[0-9]+\.[0-9]+$ ]] \
  || die "HELM_VERSION=$HELM_VERSION is not a release version such as v4.3.2"
HELM_MAJOR="${BASH_REMATCH[1]}"
# The module path carries the major version from v2 on: helm.sh/helm/v3, helm.sh/helm/v4.
HELM_MODULE="helm.sh/helm/v$HELM_MAJOR"

HELM_DIR="$RV_CACHE/helm"
BIN_DIR="$HELM_DIR/$HELM_VERSION"
BIN="$BIN_DIR/helm"
LOCKFILE="$HELM_DIR/install.lock"

# installed_version: the module version the cached binary was built from, if any.
installed_version() { module_version "$BIN" "$HELM_MODULE"; }

install() {
  command -v go >/dev/null || die "go not found; helm is built from source with the Go toolchain"
  mkdir -p "$HELM_DIR"
  with_lock # test packages running side by side build it once
  if [ "$(installed_version)" = "$HELM_VERSION" ]; then
    log "helm $HELM_VERSION already installed: $BIN"
    return 0
  fi
  mkdir -p "$BIN_DIR"
  local started=$SECONDS buildlog="$HELM_DIR/install.log"
  log "building helm $HELM_VERSION with $(go env GOVERSION) (once; a few minutes on 2 cores)"
  # Built outside the repository so that its go.mod plays no part; GOFLAGS from the caller's
  # environment (say -mod=vendor) would not apply to a module@version install.
  if ! (cd "$HELM_DIR" && GOBIN="$BIN_DIR" GOFLAGS= CGO_ENABLED=0 go install \
      "$HELM_MODULE/cmd/helm@$HELM_VERSION") >"$buildlog" 2>&1; then
    tail -20 "$buildlog" >&2 || true
    die "installing helm $HELM_VERSION failed (full output: $buildlog); set HELM_VERSION to another release"
  fi
  [ "$(installed_version)" = "$HELM_VERSION" ] \
    || die "go install finished but $BIN does not report $HELM_MODULE $HELM_VERSION"
  log "installed helm $HELM_VERSION in $((SECONDS - started)) s: $BIN"
}

path() {
  if [ "$(installed_version)" != "$HELM_VERSION" ]; then
    log "helm $HELM_VERSION is not installed; run: bash ops/helm.sh install"
    return 1
  fi
  echo "$BIN"
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

case "${1:-}" in
  install) install ;;
  path) path ;;
  *) usage ;;
esac
