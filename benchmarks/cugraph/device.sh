#!/usr/bin/env bash
# On the lent GPU machine: put the parts prepare.sh made back together as $HOME/cugraph/site, a folder for
# PYTHONPATH that makes pylibcugraph importable with the machine's own Python, NumPy, CuPy and CUDA libraries.
#   bash benchmarks/cugraph/device.sh stash DIR   copy the part(s) in DIR (one carried .dev-cugraphN folder) to
#                                                 $HOME/cugraph/parts
#   bash benchmarks/cugraph/device.sh assemble    check the parts' sha256, unpack them to $HOME/cugraph/site, link
#                                                 the machine's nvidia/ package folder into it, import pylibcugraph
# The RAPIDS libraries find the CUDA libraries through their RPATH, $ORIGIN/../../nvidia/cu13/lib and
# .../nvidia/nccl/lib, that is site/nvidia: assemble fills that folder with links to the entries of the machine's
# own site-packages/nvidia (beside CuPy), so no LD_LIBRARY_PATH is needed and `import nvidia...` finds the same files.
# benchmarks/gpu_run.sh adds $HOME/cugraph/site to PYTHONPATH where it exists.
# $HOME lasts only while the machine is kept: device_steps.md gives the calls, each within 30 s of the last.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/../parts.sh"
CUGRAPH=${CUGRAPH_HOME:-$HOME/cugraph}
case ${1:-} in
  stash)
    parts_stash "$2" "$CUGRAPH" cugraph ;;
  assemble)
    rm -rf "$CUGRAPH/site"
    parts_join "$CUGRAPH" cugraph | xz -dc -T0 | tar -C "$CUGRAPH" -xf -
    # The machine's nvidia/ folder(s), asked of its python3 without our PYTHONPATH (which would answer site/nvidia).
    mkdir -p "$CUGRAPH/site/nvidia"
    for nv in $(env -u PYTHONPATH python3 -c 'import nvidia; print(*nvidia.__path__)'); do
      for entry in "$nv"/*; do
        [ -e "$CUGRAPH/site/nvidia/$(basename "$entry")" ] || ln -s "$entry" "$CUGRAPH/site/nvidia/"
      done
    done
    for lib in cu13/lib/libcublas.so.13 cu13/lib/libcusolver.so.12 cu13/lib/libcusparse.so.12 cu13/lib/libcurand.so.10 \
      cu13/lib/libnvJitLink.so.13 nccl/lib/libnccl.so.2; do
      [ -e "$CUGRAPH/site/nvidia/$lib" ] || echo "warning: no nvidia/$lib on this machine; the RAPIDS libraries need it" >&2
    done
    echo "unpacked $(tr '\n' ' ' < "$CUGRAPH/site/WHEELS") to $CUGRAPH/site"
    # libcuvs.so (libcugraph.so links it) calls nvJitLink's 13.3 entry points (__nvJitLink*_13_3); where the machine's
    # nvJitLink is older they are missing, and libcuvs/load.py's dlopen (ctypes: every symbol bound at once) fails, which
    # it keeps quiet about, so `import pylibcugraph` then fails on libcugraph.so. cuGraph's triangle counts and Jaccard
    # never reach cuVS's JIT linking: there libcuvs.so is loaded with lazy binding instead, all its other symbols bound.
    probe='import ctypes, os, libcuvs, libkvikio, libraft, librmm
librmm.load_library(); libraft.load_library(); libkvikio.load_library()
ctypes.CDLL(os.path.join(os.path.dirname(libcuvs.__file__), "lib64", "libcuvs.so"), ctypes.RTLD_LOCAL)'
    if ! why=$(PYTHONPATH=$CUGRAPH/site python3 -c "$probe" 2>&1); then
      case $why in
        *"undefined symbol: __nvJitLink"*)
          sed -i 's/^PREFERRED_LOAD_FLAG = ctypes.RTLD_LOCAL$/& | os.RTLD_LAZY  # device.sh: this nvJitLink is older than 13.3/' \
            "$CUGRAPH/site/libcuvs/load.py"
          echo "note: ${why##*$'\n'}; libcuvs.so loads with lazy binding (libcuvs/load.py)"
          grep -q RTLD_LAZY "$CUGRAPH/site/libcuvs/load.py" || echo "warning: libcuvs/load.py not as expected, left unchanged" >&2 ;;
        *) echo "warning: libcuvs.so does not load: $why" >&2 ;;
      esac
    fi
    env -u PYTHONPATH python3 -m pip list 2>/dev/null | grep -E '^(cuda-bindings|cuda-pathfinder|cupy-cuda13x|numpy) ' || true
    PYTHONPATH=$CUGRAPH/site python3 -c 'import pylibcugraph; print("pylibcugraph", pylibcugraph.__version__, "imports")'
    # One call on the GPU (a triangle: each vertex in one), as peers.cugraph_graph makes it; not fatal here, the
    # graph suite records a failing peer as its error.
    PYTHONPATH=$CUGRAPH/site python3 -c '
import cupy, numpy as np, pylibcugraph as plc
h = plc.ResourceHandle()
indptr, indices = cupy.asarray([0, 2, 4, 6], np.int32), cupy.asarray([1, 2, 0, 2, 0, 1], np.int32)
props = plc.GraphProperties(is_symmetric=True, is_multigraph=False)
G = plc.SGGraph(h, props, indptr, indices, cupy.ones(6, np.float32), store_transposed=False, renumber=False,
                do_expensive_check=False, input_array_format="CSR")
print("triangle_count of a triangle:", plc.triangle_count(h, G, None, False)[1].tolist())' || echo "warning: pylibcugraph imports but its first GPU call failed" >&2
    echo "PYTHONPATH=$CUGRAPH/site" ;;
  *)
    echo "usage: $0 stash DIR | assemble" >&2
    exit 2 ;;
esac
