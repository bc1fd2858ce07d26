#!/usr/bin/env bash
# The C harness end to end: builds (build.sh), then runs nwaku's sequences against zerokit
# v2.0.2's librln and Canopy's, all under AddressSanitizer/LeakSanitizer, and compares:
#   golden    deterministic functions, byte for byte
#   prove     each library's proof (and its partial-path proof)
#   check     every proof under both libraries: layout, verification, tampered copies, ok/err
# and first runs librln's own tests (the stable fuzz run of its byte-taking entry points).
# Usage: run.sh FIXTURE OUT. Exit status 0 only when every comparison holds.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
FIXTURE="${1:?usage: run.sh FIXTURE OUT}"
OUT="${2:?usage: run.sh FIXTURE OUT}"
bash "$HERE/build.sh" "$OUT"
# librln's own tests: the byte-taking entry points fuzzed on stable, the crate example.
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(dirname "$(dirname "$HERE")")/target}/librln-harness" \
  cargo test -q --release --manifest-path "$(dirname "$HERE")/Cargo.toml"
echo "librln tests: passed"
cd "$OUT"
# The library exports exactly nwaku's functions (read from librln.so: the archive's LTO
# objects keep no symbol table nm can read; both come from the same build).
nm -D --defined-only librln-canopy.so | awk '$2 == "T" && $3 ~ /^ffi_/ {print $3}' | sort -u > exported-canopy.txt
grep -v '^#' "$(dirname "$HERE")/nwaku-symbols.txt" | sort > nwaku-symbols.txt
if ! diff -u nwaku-symbols.txt exported-canopy.txt; then
  echo "FAIL: librln does not export exactly nwaku's functions" >&2; exit 1
fi
echo "symbols: librln exports exactly nwaku's $(wc -l < nwaku-symbols.txt) functions"
# Leaks are errors; every handle the harness gets is freed.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:exitcode=23"

for lib in zerokit canopy; do
  ./harness-$lib-asan golden "$FIXTURE" > "golden-$lib.txt"
  ./harness-$lib-asan prove "$FIXTURE" "proof-$lib.bin" > "prove-$lib.txt"
done
# The portable path (what a CPU without IFMA runs), forced: its proofs are checked below too.
LIBRLN_ARITHMETIC=portable ./harness-canopy-asan prove "$FIXTURE" "proof-portable.bin" > prove-portable.txt
if LIBRLN_ARITHMETIC=fast ./harness-canopy-asan prove "$FIXTURE" x.bin > /dev/null 2>&1; then
  echo "FAIL: an unknown LIBRLN_ARITHMETIC was accepted" >&2; exit 1
fi
# Proofs made with the tables built (LIBRLN_WAIT_FOR_TABLES=1; the ones above may come before
# them, from the bases alone) at the default budget, a smaller one (a shift every few windows)
# and an ample one (every shift), on the default arithmetic and the portable one; and with no
# tables at all (budget 0). Their proofs are checked below too.
BUDGET_PROOFS=()
for budget in "" 4 256 0; do
  for arithmetic in auto portable; do
    name="proof-budget${budget:-default}-$arithmetic.bin"
    LIBRLN_WAIT_FOR_TABLES=1 LIBRLN_TABLE_BUDGET_MIB=$budget LIBRLN_ARITHMETIC=$arithmetic \
      ./harness-canopy-asan prove "$FIXTURE" "$name" > "${name%.bin}.txt"
    BUDGET_PROOFS+=("$name" "$name.partial")
  done
done
if LIBRLN_TABLE_BUDGET_MIB=lots ./harness-canopy-asan prove "$FIXTURE" x.bin > /dev/null 2>&1; then
  echo "FAIL: a malformed LIBRLN_TABLE_BUDGET_MIB was accepted" >&2; exit 1
fi
if LIBRLN_WAIT_FOR_TABLES=yes ./harness-canopy-asan prove "$FIXTURE" x.bin > /dev/null 2>&1; then
  echo "FAIL: a malformed LIBRLN_WAIT_FOR_TABLES was accepted" >&2; exit 1
fi
if ! diff -u golden-zerokit.txt golden-canopy.txt; then
  echo "FAIL: deterministic outputs differ" >&2; exit 1
fi
echo "golden: identical ($(wc -l < golden-canopy.txt) lines)"

for proof in proof-zerokit.bin proof-zerokit.bin.partial proof-canopy.bin proof-canopy.bin.partial \
    proof-portable.bin proof-portable.bin.partial "${BUDGET_PROOFS[@]}"; do
  for lib in zerokit canopy; do
    ./harness-$lib-asan check "$FIXTURE" "$proof" > "check-$lib-$(basename "$proof").txt"
  done
  if ! diff -u "check-zerokit-$(basename "$proof").txt" "check-canopy-$(basename "$proof").txt"; then
    echo "FAIL: the libraries disagree on $proof" >&2; exit 1
  fi
  for lib in zerokit canopy; do
    grep -q '^receive: ok$' "check-$lib-$(basename "$proof").txt" \
      || { echo "FAIL: $proof does not verify under $lib" >&2; exit 1; }
  done
  echo "check $proof: both libraries agree on $(wc -l < "check-canopy-$(basename "$proof").txt") lines; it verifies under both"
done
echo "all comparisons hold"
