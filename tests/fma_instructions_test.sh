#!/usr/bin/env bash
# cpu_fma_peak claims to time fused multiply-adds: its chains' function must compile to FMA
# instructions (on x86-64, vfmadd...; skipped, 77, elsewhere or without objdump). Without
# -ffp-contract=fast, ISO C mode would time a multiply and an add instead, at half the rate.
# Usage: fma_instructions_test.sh CPU_FMA_PEAK
set -u
binary=$1
[ "$(uname -m)" = x86_64 ] || { echo "skipped: not x86-64"; exit 77; }
command -v objdump >/dev/null || { echo "skipped: no objdump"; exit 77; }
# the function's body, up to the next symbol
body=$(objdump -d --no-show-raw-insn "$binary" | awk '/<multiply_add_chains[^>]*>:$/ {on=1; next} /^$/ {on=0} on')
[ -n "$body" ] || { echo "FAIL: no multiply_add_chains in $binary" >&2; exit 1; }
fmas=$(grep -c 'vfmadd' <<<"$body")
mults=$(grep -cE 'vmulps|vaddps' <<<"$body")
echo "multiply_add_chains: $fmas FMA instructions, $mults separate multiplies or adds"
[ "$fmas" -ge 16 ] || { echo "FAIL: the chains are not FMA instructions" >&2; exit 1; }
