// Result checking: what each rank puts in its send buffer and what the result must be,
// element by element, in every dtype.
//
// Every contributed value is a small integer, so it is exact in every dtype (bfloat16 holds
// integers up to 256 exactly, fp16 up to 2048), and reductions are chosen so that their exact
// results stay representable: checks compare bit for bit, with no tolerance. The expected
// reduction follows the rules plexus.h documents (integer sum/prod wrap in the element type,
// fp16/bf16 accumulate in fp32 and round once, avg divides the sum by the rank count in the
// accumulation type and integers truncate).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "plexus/plexus.h"

namespace plexus::bench {

enum class PatternKind {
  kReduce,   // sum/min/max/avg: values 1..max_value, small enough that nranks of them sum exactly
  kProduct,  // prod: 1s, with at most one 2 per element across the ranks (no overflow anywhere)
  kMove,     // collectives that only move data: values 1..100 that differ from rank to rank
};

// The value rank r contributes at element index i of its send data. Values repeat with a
// prime period, so expected reductions come from a table of kPeriod entries (computed once)
// rather than from nranks values per element; a misplaced block shows up unless its offset
// is a multiple of the period.
class DataPattern {
 public:
  static constexpr size_t kPeriod = 1021;

  // seed shifts the whole pattern, so consecutive checks see different data.
  DataPattern(PatternKind kind, plexus_dtype_t dtype, int nranks, uint32_t seed);

  int64_t value(int rank, size_t index) const { return value_at_phase(rank, phase(index)); }
  // Where index falls in the period, and the value at that point: value(r, i) ==
  // value_at_phase(r, phase(i)).
  size_t phase(size_t index) const { return (index + seed_) % kPeriod; }
  int64_t value_at_phase(int rank, size_t phase) const;
  PatternKind kind() const { return kind_; }
  plexus_dtype_t dtype() const { return dtype_; }
  int nranks() const { return nranks_; }
  uint32_t seed() const { return seed_; }
  // The largest value a kReduce pattern uses for this dtype and rank count.
  int64_t max_value() const { return max_value_; }

 private:
  PatternKind kind_;
  plexus_dtype_t dtype_;
  int nranks_;
  uint32_t seed_;
  int64_t max_value_;
};

// Writes value(rank, first_index + j) for j in [0, count) into buffer (count elements of
// pattern.dtype()).
void fill_contribution(void* buffer, size_t count, const DataPattern& pattern, int rank,
                       size_t first_index);

// Counts the elements j in [0, count) of buffer that differ from value(rank, first_index + j).
uint64_t count_wrong_contribution(const void* buffer, size_t count, const DataPattern& pattern,
                                  int rank, size_t first_index);

// Counts the elements j in [0, count) of buffer that differ from the reduction with op over
// all ranks of value(q, first_index + j).
uint64_t count_wrong_reduction(const void* buffer, size_t count, const DataPattern& pattern,
                               plexus_redop_t op, size_t first_index);

// The bits (zero-extended to 64) of `value` stored as one element of dtype.
uint64_t element_bits(plexus_dtype_t dtype, int64_t value);

// The bits (zero-extended to 64) of the element plexusd must produce when it reduces the
// given per-rank values (in rank order) with op. Exposed for tests.
uint64_t reduced_element_bits(plexus_dtype_t dtype, plexus_redop_t op,
                              std::span<const int64_t> values);

}  // namespace plexus::bench
