// Data patterns for checking collectives exactly: every value is a small integer (or,
// for avg, a quotient computed by the documented rule), so float results compare bit
// for bit. Elements are handled as raw bits in a uint64_t.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "plexus/plexus.h"

namespace plexus::test {

// Rank `rank`'s input element at index i for a collective using `op`.
uint64_t input_bits(plexus_dtype_t dtype, plexus_redop_t op, int rank, size_t i);
// The reduction over ranks 0..nranks-1 of input element i.
uint64_t reduced_bits(plexus_dtype_t dtype, plexus_redop_t op, int nranks, size_t i);

uint64_t load_bits(const void* buffer, plexus_dtype_t dtype, size_t index);
void store_bits(void* buffer, plexus_dtype_t dtype, size_t index, uint64_t bits);

// Writes input_bits(rank, first_index + j) for j < count at buffer[j].
void fill_input(void* buffer, plexus_dtype_t dtype, plexus_redop_t op, int rank, size_t count,
                size_t first_index = 0);

std::string to_hex(uint64_t v);

// Compares buffer[j] for j < count against expected(j); "" or a sentence naming the
// first wrong element and how many were wrong.
template <typename Expected>
std::string compare(const void* buffer, plexus_dtype_t dtype, size_t count, Expected&& expected) {
  size_t wrong = 0;
  std::string first;
  for (size_t j = 0; j < count; ++j) {
    const uint64_t want = expected(j);
    const uint64_t got = load_bits(buffer, dtype, j);
    if (got == want) continue;
    if (wrong++ == 0) {
      first = "element " + std::to_string(j) + " has bits 0x" + to_hex(got) + ", expected 0x" +
              to_hex(want);
    }
  }
  if (wrong == 0) return {};
  return std::to_string(wrong) + " of " + std::to_string(count) + " elements wrong; " + first;
}

}  // namespace plexus::test
