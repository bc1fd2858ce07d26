#!/usr/bin/env bash
# nwaku's per-message work through the C interface, zerokit v2.0.2's librln (stateless, no
# `parallel`: as nwaku builds it) against Canopy's, in one run, on 1 and 2 threads:
#   prove   = witness + proof + to-bytes (ffi_rln_witness_input_new, ffi_generate_rln_proof,
#             ffi_rln_proof_to_bytes_le), median of N
#   verify  = signal hash + proof from its parts + verify against a window of roots
#             (ffi_hash_to_field_le, ffi_rln_proof_new, ffi_verify_with_roots), median of N
#   start-up = ffi_rln_new's return; first proof = the proof right after it (Canopy proves
#             without tables while it builds them in the background);
#             start MiB = the peak RSS that start-up and first proof added; peak MiB = the peak
#             RSS the whole run added (tables included: the timed proofs start SETTLE seconds
#             after the first, so that background work is done and the medians are steady)
# Usage: bench.sh [N] [OUT]   (N defaults to 20; OUT to target/librln-harness/bench; SETTLE to 8)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$(dirname "$HERE")")"
N="${1:-20}"
OUT="${2:-${CARGO_TARGET_DIR:-$ROOT/target}/librln-harness/bench}"
bash "$HERE/build.sh" "$OUT"
FIXTURE="$HERE/fixture.hex"
field() { sed -n "s/.* $1 \([0-9.]*\).*/\1/p" <<< "$2"; }
SETTLE="${SETTLE:-8}"
printf "%-8s %-16s %12s %12s %12s %16s %14s %12s\n" threads library prove_ms verify_ms startup_s first_proof_s startup_MiB peak_MiB
# "canopy-portable": ours with LIBRLN_ARITHMETIC=portable, the path a CPU without IFMA runs.
# LIBRLN_TABLE_BUDGET_MIB, when set in the environment, caps our tables (zerokit ignores it).
run() { # library, threads
  local bin=$1 env=()
  [[ $1 == canopy-portable ]] && { bin=canopy; env=(LIBRLN_ARITHMETIC=portable); }
  env "${env[@]}" RAYON_NUM_THREADS=$2 "$OUT/harness-$bin" bench "$FIXTURE" "$N" "$SETTLE" | grep '^BENCH'
}
for threads in 1 2; do
  declare -A prove verify
  for lib in zerokit canopy canopy-portable; do
    line=$(run $lib $threads)
    prove[$lib]=$(field prove_median_s "$line")
    verify[$lib]=$(field verify_median_s "$line")
    printf "%-8s %-16s %12.2f %12.3f %12.3f %16.3f %14.1f %12.1f\n" "$threads" "$lib" \
      "$(awk "BEGIN{print ${prove[$lib]}*1000}")" "$(awk "BEGIN{print ${verify[$lib]}*1000}")" \
      "$(field startup_s "$line")" "$(field first_proof_s "$line")" "$(field startup_rss_mib "$line")" \
      "$(field peak_rss_added_mib "$line")"
  done
  for lib in canopy canopy-portable; do
    printf "%-8s %-16s %11.2fx %11.2fx\n" "$threads" "ratio $lib" \
      "$(awk "BEGIN{print ${prove[zerokit]}/${prove[$lib]}}")" \
      "$(awk "BEGIN{print ${verify[zerokit]}/${verify[$lib]}}")"
  done
done
echo "(N=$N messages each; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); IFMA: $(grep -q avx512ifma /proc/cpuinfo && echo yes || echo no); table budget: ${LIBRLN_TABLE_BUDGET_MIB:-default} MiB)"
