# shellcheck shell=bash
# Sourced by the end-to-end scripts: what their openings had each written for itself.
#   fail MSG...  prints "FAIL: MSG" and exits 1
#   skip MSG     a missing prerequisite: under CI=true it fails (CI installs everything), elsewhere "SKIP: MSG", exit 0
#   e2e_tmp      T: a fresh temporary directory, removed when the script exits
fail() { echo "FAIL: $*"; exit 1; }
skip() {
  if [[ ${CI:-} == true ]]; then echo "FAIL: $1"; exit 1; fi
  echo "SKIP: $1"; exit 0
}
e2e_tmp() {
  T=$(mktemp -d)
  trap 'rm -rf "$T"' EXIT
}
