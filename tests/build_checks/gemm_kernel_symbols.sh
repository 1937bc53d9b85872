#!/bin/sh
# The AVX2 GEMM object defines no global or weak code outside its renamed Eigen namespace and
# its one entry point: any other function (a standard-library template, say) could be picked by
# the linker for the generic code path too and run AVX2 instructions on a CPU without them.
# Data (typeinfo, guard variables) is the same whichever copy the linker keeps, so it may be
# shared.
#   gemm_avx2_symbols.sh OBJECT_FILE
set -eu
object=$1
[ -f "$object" ] || { echo "no object file $object" >&2; exit 1; }
# Code symbols (T: global, W: weak), by their mangled names: the namespace appears as
# 24syncopate_eigen_avx2_fma wherever it qualifies the function, its arguments aside.
stray=$(nm --defined-only "$object" | awk '$2 == "T" || $2 == "W" { print $3 }' |
        grep -v -e '^_ZN[KVR]*24syncopate_eigen_avx2_fma' -e '^_ZNK*24syncopate_eigen_avx2_fma' \
                -e '^_ZN9syncopate11gemm_detail16product_avx2_fma' || true)
# Template functions carry their return type after the name, so a stray candidate is kept only
# if its demangled name does not begin (after a return type) with the namespace either.
bad=""
for symbol in $stray; do
  name=$(echo "$symbol" | c++filt)
  case $name in
    syncopate_eigen_avx2_fma::* | *" syncopate_eigen_avx2_fma::"*) ;;
    *) bad="$bad
  $name" ;;
  esac
done
if [ -n "$bad" ]; then
  echo "code symbols of $object outside syncopate_eigen_avx2_fma::$bad" >&2
  exit 1
fi
nm --defined-only "$object" | grep -q product_avx2_fma ||
  { echo "$object does not define product_avx2_fma" >&2; exit 1; }
echo "ok: $object"
