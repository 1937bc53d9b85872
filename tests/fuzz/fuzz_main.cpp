// A libFuzzer program for one target: SYNCOPATE_FUZZ_TARGET names its entry function
// (tests/fuzz/fuzz_targets.hpp). Built by the fuzz preset only (clang, -fsanitize=fuzzer).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  syncopate::fuzz::SYNCOPATE_FUZZ_TARGET(std::span<const uint8_t>(data, size));
  return 0;
}
