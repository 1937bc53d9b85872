#!/bin/sh
# An AVX GEMM object defines no global or weak code outside its renamed Eigen namespace and its
# one entry point: any other function (a standard-library template, say) could be picked by the
# linker for the generic code path too and run AVX instructions on a CPU without them. Data
# (typeinfo, guard variables) is the same whichever copy the linker keeps, so it may be shared.
#   gemm_kernel_symbols.sh OBJECT_FILE KERNEL      (KERNEL: avx2_fma or avx512)
set -eu
object=$1
kernel=$2
namespace=syncopate_eigen_$kernel
entry=product_$kernel
[ -f "$object" ] || { echo "no object file $object" >&2; exit 1; }
# Code symbols (T: global, W: weak), by their mangled names: the namespace appears as
# <length><namespace> wherever it qualifies the function, its arguments aside.
mangled=${#namespace}$namespace
stray=$(nm --defined-only "$object" | awk '$2 == "T" || $2 == "W" { print $3 }' |
        grep -v -e "^_ZN[KVR]*$mangled" -e "^_ZNK*$mangled" \
                -e "^_ZN9syncopate11gemm_detail${#entry}$entry" || true)
# Template functions carry their return type after the name, so a stray candidate is kept only
# if its demangled name does not begin (after a return type) with the namespace either.
bad=""
for symbol in $stray; do
  name=$(echo "$symbol" | c++filt)
  case $name in
    "$namespace"::* | *" $namespace"::*) ;;
    *) bad="$bad
  $name" ;;
  esac
done
if [ -n "$bad" ]; then
  echo "code symbols of $object outside $namespace::$bad" >&2
  exit 1
fi
nm --defined-only "$object" | grep -q "$entry" ||
  { echo "$object does not define $entry" >&2; exit 1; }
echo "ok: $object"
