// Each fuzz target provides valid inputs to start from; the replay driver (compilers
// without libFuzzer) runs them and any corpus files, and writes them out for libFuzzer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

std::vector<std::vector<uint8_t>> plexus_fuzz_seeds();
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
