#!/bin/sh
# The AVX2 GEMM object defines no global or weak symbol outside its renamed Eigen namespace and
# its one entry point: any other (a standard-library template, say) could be picked by the linker
# for the generic code path too and run AVX2 instructions on a CPU without them.
#   gemm_avx2_symbols.sh OBJECT_FILE
set -eu
object=$1
[ -f "$object" ] || { echo "no object file $object" >&2; exit 1; }
stray=$(nm -C --defined-only "$object" | awk '$2 ~ /^[TWVBDRSGu]$/ { $1 = ""; $2 = ""; print }' |
        grep -v -e '^ *\(guard variable for \)\?syncopate_eigen_avx2_fma::' -e 'syncopate::gemm_detail::product_avx2_fma(' \
                -e 'DW\.ref\.__gxx_personality_v0' || true)
if [ -n "$stray" ]; then
  echo "symbols of $object outside syncopate_eigen_avx2_fma::" >&2
  echo "$stray" >&2
  exit 1
fi
count=$(nm --defined-only "$object" | grep -c product_avx2_fma)
[ "$count" -ge 1 ] || { echo "$object does not define product_avx2_fma" >&2; exit 1; }
echo "ok: $object"
