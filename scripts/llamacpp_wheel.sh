#!/usr/bin/env bash
# Build the llama-cpp-python wheel once per machine and print its path; later calls reuse it.
# Named flags, never -march=native: the CPUs differ between machines, and a native build on the
# AVX-512/AMX Xeons crashes in libggml-cpu.so (AMX). x86-64-v3 (AVX2, FMA, F16C) runs on all of them.
# LLAMACPP_VARIANT=avx512 (opt-in, for CPUs with AVX-512 F, BW, DQ, VL, VBMI, VNNI and BF16; AMX off):
# bench/llamacpp_builds.py measured it 1.41x faster at prefill and 1.05x at decode than x86-64-v3 on an
# AVX-512 Xeon, same greedy tokens single-stream; but its batched greedy text (8 sequences, 1 thread)
# differed from one-by-one decoding on one test prompt (tests/test_llamacpp.py): not the default.
set -euo pipefail
VERSION="${LLAMACPP_VERSION:-0.3.36}"
AVX512_FLAGS="avx512f avx512bw avx512dq avx512vl avx512vbmi avx512_vnni avx512_bf16"
has_avx512() { for f in $AVX512_FLAGS; do grep -qw "$f" /proc/cpuinfo || return 1; done; }
LLAMACPP_VARIANT="${LLAMACPP_VARIANT:-x86-64-v3}"
VARIANT="$LLAMACPP_VARIANT"
V3="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_OPENMP=ON -DLLAVA_BUILD=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF"
case "$VARIANT" in
  x86-64-v3) CMAKE_ARGS="$V3" ;;
  avx512)
    has_avx512 || { echo "llamacpp: LLAMACPP_VARIANT=avx512 needs $AVX512_FLAGS; this CPU lacks one" >&2; exit 2; }
    CMAKE_ARGS="${V3/-DGGML_AVX512=OFF/-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON}" ;;
  *) echo "llamacpp: LLAMACPP_VARIANT must be x86-64-v3 or avx512, not $VARIANT" >&2; exit 2 ;;
esac
KEY="$(printf '%s' "$VERSION $VARIANT $CMAKE_ARGS" | sha256sum | cut -c1-10)"
DIR="${ROLEBOUND_WHEELS:-$HOME/.cache/rolebound/wheels}/llama_cpp_python-$VERSION-$VARIANT-$KEY"
PY="${PYTHON:-python3}"
# a wheel tagged for one CPython (cpXY) serves that version only; a py3 one serves any
PYTAG="$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
found() {
  for f in "$DIR"/llama_cpp_python-*-"$PYTAG"-*.whl "$DIR"/llama_cpp_python-*-py3-*.whl; do
    if [ -f "$f" ]; then echo "$f"; return 0; fi
  done
}
if [ -n "$(found)" ]; then found; exit 0; fi
if ! grep -q avx2 /proc/cpuinfo; then echo "llamacpp: this CPU lacks AVX2; the portable build needs it" >&2; exit 2; fi
mkdir -p "$DIR"
exec 9>"$DIR.lock"; flock 9          # one build per machine even if two `make llamacpp` race
if [ -n "$(found)" ]; then found; exit 0; fi
SDIST="${LLAMACPP_SDIST:-}"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
if [ -z "$SDIST" ]; then
  "$PY" -m pip download -q --no-deps --no-binary :all: -d "$TMP" "llama-cpp-python==$VERSION" >&2
  SDIST="$(ls "$TMP"/llama_cpp_python-*.tar.gz)"
fi
echo "llamacpp: building the wheel from $SDIST (about 10 min on 2 cores; once per machine)" >&2
START=$(date +%s)
# --no-cache-dir: pip would keep the wheel in its own cache under the sdist's path alone, and give it
# back for a later build of the same LLAMACPP_SDIST with other flags
CMAKE_ARGS="$CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
  nice -n 5 "$PY" -m pip wheel -q --no-cache-dir --no-deps -w "$TMP/out" "$SDIST" >&2
mv "$TMP"/out/llama_cpp_python-*.whl "$DIR"/
printf '%s\nvariant=%s\nbuild_seconds=%s\nbuilt_on=%s\n' "$CMAKE_ARGS" "$VARIANT" \
  "$(( $(date +%s) - START ))" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" > "$DIR/BUILD_INFO"
found
