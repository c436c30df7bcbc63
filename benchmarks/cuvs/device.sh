#!/usr/bin/env bash
# On the lent GPU machine: put the parts prepare.sh made back together under $HOME/cuvs and build the harness.
#   bash benchmarks/cuvs/device.sh stash DIR   copy the part(s) in DIR (one carried .dev-cuvsN folder) to $HOME/cuvs/parts
#   bash benchmarks/cuvs/device.sh assemble    check the parts' sha256, unpack them to $HOME/cuvs/root, build
#                                              $HOME/cuvs/root/cuvs_harness there (with that machine's nvcc)
# $HOME lasts only while the machine is kept: device_steps.md gives the calls, each within 30 s of the last.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CUVS=${CUVS_HOME:-$HOME/cuvs}
. "$HERE/../parts.sh"
case ${1:-} in
  stash)
    parts_stash "$2" "$CUVS" cuvs ;;
  assemble)
    rm -rf "$CUVS/root" && mkdir -p "$CUVS/root"
    parts_join "$CUVS" cuvs | xz -dc -T0 | tar -C "$CUVS/root" -xf -
    echo "unpacked cuVS $(tr '\n' ' ' < "$CUVS/root/CUVS_VERSION" 2>/dev/null) to $CUVS/root"
    nvcc --version | tail -1
    time bash "$HERE/build.sh" "$CUVS/root" "$CUVS/root/cuvs_harness" 2>&1 | grep -Ev 'deprecated|^\s*$' | tail -20
    [ -x "$CUVS/root/cuvs_harness" ] ;;
  *)
    echo "usage: $0 stash DIR | assemble" >&2
    exit 2 ;;
esac
