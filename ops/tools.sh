#!/usr/bin/env bash
# Debian tools that the tests and the local stack use, installed with apt-get when missing.
#
#   ops/tools.sh install kcat|prometheus|libreoffice|chromium|all
#
# kcat: a Kafka client nobody here wrote, to check the broker and our events from outside.
# prometheus: the server and promtool (rule and config checks).
# libreoffice: headless Calc (soffice), to check that Excel reports convert to PDF, and Writer,
#   to make the PDF and DOCX files the document-reading tests read.
# chromium: headless Chromium, the browser the review page's tests drive.
# Already-present tools are left alone; `apt-get update` runs only when a package is not
# known to apt yet, and at most once.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

APT_UPDATED=0

# as_root CMD...: run CMD as root, through sudo when this shell is not root.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "installing packages needs root (or sudo): $*"
  fi
}

# apt_knows PKG: true when apt has an installation candidate for PKG.
apt_knows() {
  local candidate
  candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
  [ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

# install_pkg PKG BINARY...: install PKG unless all of its BINARIES are already on PATH.
install_pkg() {
  local pkg=$1 bin missing=()
  shift
  for bin in "$@"; do command -v "$bin" >/dev/null || missing+=("$bin"); done
  if [ ${#missing[@]} -eq 0 ]; then
    log "$pkg: already installed ($*)"
    return 0
  fi
  command -v apt-get >/dev/null || die "$pkg: apt-get not found; install ${missing[*]} by hand"
  if ! apt_knows "$pkg" && [ "$APT_UPDATED" -eq 0 ]; then
    log "$pkg: not in apt's package lists; running apt-get update"
    as_root apt-get update -qq || die "apt-get update failed"
    APT_UPDATED=1
  fi
  apt_knows "$pkg" || die "$pkg: no such package in the configured Debian repositories"
  log "$pkg: installing with apt-get"
  # Packages such as prometheus ship a service; policy-rc.d keeps apt from starting it here,
  # since the local stack runs its own instance on its own port.
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"
    added_policy=1
  fi
  local rc=0 aptlog="$RV_RUN/apt-$pkg.log"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" \
    >"$aptlog" 2>&1 || rc=$?
  [ "$added_policy" -eq 0 ] || as_root rm -f "$policy"
  if [ "$rc" -ne 0 ]; then
    tail -20 "$aptlog" >&2
    die "$pkg: apt-get install failed (exit $rc; full output: $aptlog)"
  fi
  for bin in "$@"; do
    command -v "$bin" >/dev/null || die "$pkg: installed, but $bin is still not on PATH"
  done
  log "$pkg: installed ($*)"
}

# install_libreoffice: Debian's Calc without the X11 front end where the release has it
# (libreoffice-calc-nogui, bookworm and later), the desktop package otherwise.
install_libreoffice() {
  local pkg=libreoffice-calc-nogui
  if command -v soffice >/dev/null; then
    install_pkg "$pkg" soffice
    return
  fi
  command -v apt-get >/dev/null || die "libreoffice: apt-get not found; install LibreOffice Calc by hand"
  if ! apt_knows "$pkg" && ! apt_knows libreoffice-calc && [ "$APT_UPDATED" -eq 0 ]; then
    log "libreoffice: not in apt's package lists; running apt-get update"
    as_root apt-get update -qq || die "apt-get update failed"
    APT_UPDATED=1
  fi
  apt_knows "$pkg" || pkg=libreoffice-calc
  install_pkg "$pkg" soffice
}

# install_writer: LibreOffice Writer (no binary of its own: its library is looked for), the
# nogui package where the release has it.
install_writer() {
  if ls /usr/lib/libreoffice/program/libswlo.so >/dev/null 2>&1; then
    log "libreoffice writer: already installed"
    return 0
  fi
  local pkg=libreoffice-writer-nogui
  if ! apt_knows "$pkg" && ! apt_knows libreoffice-writer && [ "$APT_UPDATED" -eq 0 ]; then
    log "libreoffice writer: not in apt's package lists; running apt-get update"
    as_root apt-get update -qq || die "apt-get update failed"
    APT_UPDATED=1
  fi
  apt_knows "$pkg" || pkg=libreoffice-writer
  log "$pkg: installing with apt-get"
  local aptlog="$RV_RUN/apt-$pkg.log"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" \
    >"$aptlog" 2>&1 || { tail -20 "$aptlog" >&2; die "$pkg: apt-get install failed (full output: $aptlog)"; }
  ls /usr/lib/libreoffice/program/libswlo.so >/dev/null 2>&1 || die "$pkg: installed, but Writer's library is not there"
  log "$pkg: installed"
}

install() {
  case "${1:-}" in
    kcat) install_pkg kcat kcat ;;
    prometheus) install_pkg prometheus prometheus promtool ;;
    libreoffice) install_libreoffice; install_writer ;;
    chromium) install_pkg chromium chromium ;;
    all)
      install_pkg kcat kcat
      install_pkg prometheus prometheus promtool
      install_libreoffice
      install_writer
      install_pkg chromium chromium
      ;;
    *) die "usage: ops/tools.sh install kcat|prometheus|libreoffice|chromium|all" ;;
  esac
}

case "${1:-}" in
  install) install "${2:-}" ;;
  *) die "usage: ops/tools.sh install kcat|prometheus|libreoffice|chromium|all" ;;
esac
