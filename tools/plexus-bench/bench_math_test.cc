// Tests of plexus-bench's I/O-free parts: sizes, row shapes, bandwidth, statistics, the
// check data and its expected values, and the table's formatting.
#include "tools/plexus-bench/bench_math.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "shm/dtype.h"
#include "tools/plexus-bench/check_data.h"
#include "tools/plexus-bench/report.h"

namespace plexus::bench {
namespace {

TEST(ParseByteSize, AcceptsPlainNumbersAndBinarySuffixes) {
  EXPECT_EQ(parse_byte_size("8"), 8u);
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("1k"), 1024u);
  EXPECT_EQ(parse_byte_size("64K"), 64u << 10);
  EXPECT_EQ(parse_byte_size("64M"), uint64_t{64} << 20);
  EXPECT_EQ(parse_byte_size("2g"), uint64_t{2} << 30);
}

TEST(ParseByteSize, RejectsMalformedAndOverflowingValues) {
  for (const char* text : {"", "M", "12x", "-1", "1.5M", " 8", "8 ", "0x10", "1KB"}) {
    EXPECT_FALSE(parse_byte_size(text).has_value()) << text;
  }
  EXPECT_EQ(parse_byte_size("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(parse_byte_size("18446744073709551616").has_value());
  EXPECT_FALSE(parse_byte_size("17179869184G").has_value());
}

TEST(SweepSizes, MultipliesByTheFactorUpToTheMaximum) {
  const auto sizes = sweep_sizes(8, uint64_t{64} << 20, 2, 0);
  ASSERT_EQ(sizes.size(), 24u);  // 2^3 .. 2^26
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), uint64_t{64} << 20);
  EXPECT_EQ(sweep_sizes(3, 20, 2, 0), (std::vector<uint64_t>{3, 6, 12}));
  EXPECT_EQ(sweep_sizes(5, 5, 4, 0), (std::vector<uint64_t>{5}));
}

TEST(SweepSizes, AddsTheStepWhenGiven) {
  EXPECT_EQ(sweep_sizes(1, 10, 2, 3), (std::vector<uint64_t>{1, 4, 7, 10}));
  EXPECT_EQ(sweep_sizes(0, 2, 2, 1), (std::vector<uint64_t>{0, 1, 2}));
}

TEST(SweepSizes, NeverLoopsForeverOrOverflows) {
  EXPECT_TRUE(sweep_sizes(0, 100, 2, 0).empty());
  EXPECT_TRUE(sweep_sizes(1, 100, 1, 0).empty());
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(sweep_sizes(uint64_t{1} << 63, max, 2, 0).size(), 1u);
  EXPECT_EQ(sweep_sizes(max - 1, max, 0, 5).size(), 1u);
}

TEST(RowShape, WholeBufferCollectivesUseTheSizeAsIs) {
  for (const Collective collective : {Collective::kAllReduce, Collective::kBroadcast,
                                      Collective::kReduce, Collective::kSendRecv}) {
    const RowShape shape = row_shape(collective, 8 << 20, 4, 4);
    EXPECT_EQ(shape.count, 2u << 20);
    EXPECT_EQ(shape.send_count, 2u << 20);
    EXPECT_EQ(shape.recv_count, 2u << 20);
    EXPECT_EQ(shape.bytes, 8u << 20);
  }
  EXPECT_EQ(row_shape(Collective::kAllReduce, 7, 4, 2).count, 1u);  // whole elements only
  EXPECT_EQ(row_shape(Collective::kAllReduce, 3, 4, 2).count, 0u);
}

TEST(RowShape, SplitCollectivesCountPerRankAndReportTheLargerBuffer) {
  const RowShape gather = row_shape(Collective::kAllGather, 8 << 20, 4, 4);
  EXPECT_EQ(gather.count, 512u << 10);
  EXPECT_EQ(gather.send_count, 512u << 10);
  EXPECT_EQ(gather.recv_count, 2u << 20);
  EXPECT_EQ(gather.bytes, 8u << 20);

  const RowShape scatter = row_shape(Collective::kReduceScatter, 8 << 20, 4, 4);
  EXPECT_EQ(scatter.count, 512u << 10);
  EXPECT_EQ(scatter.send_count, 2u << 20);
  EXPECT_EQ(scatter.recv_count, 512u << 10);
  EXPECT_EQ(scatter.bytes, 8u << 20);

  const RowShape all_to_all = row_shape(Collective::kAllToAll, 8 << 20, 4, 4);
  EXPECT_EQ(all_to_all.count, 512u << 10);
  EXPECT_EQ(all_to_all.send_count, 2u << 20);
  EXPECT_EQ(all_to_all.recv_count, 2u << 20);
}

TEST(RowShape, SplitCollectivesRoundEachRanksBlockToSixteenBytes) {
  // 100 bytes of float over 4 ranks: 6 floats each, rounded down to 4 (16 bytes).
  const RowShape shape = row_shape(Collective::kAllGather, 100, 4, 4);
  EXPECT_EQ(shape.count, 4u);
  EXPECT_EQ(shape.bytes, 64u);
  // int8 at 8 bytes over 4 ranks: 2 each, below one 16-byte unit.
  EXPECT_EQ(row_shape(Collective::kAllToAll, 8, 1, 4).count, 0u);
  // double: two per unit.
  EXPECT_EQ(row_shape(Collective::kReduceScatter, 3 * 8 * 3, 8, 3).count, 2u);
}

TEST(Bandwidth, BusFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllToAll, 2), 0.5);
  for (const Collective collective :
       {Collective::kBroadcast, Collective::kReduce, Collective::kSendRecv}) {
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(collective, 8), 1.0);
  }
}

TEST(Bandwidth, AlgorithmBandwidthIsBytesPerNanosecond) {
  EXPECT_DOUBLE_EQ(algorithm_bandwidth_gbs(1'000'000'000, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(algorithm_bandwidth_gbs(8 << 20, 1e-3), 8.388608);
  EXPECT_EQ(algorithm_bandwidth_gbs(100, 0.0), 0.0);
}

TEST(Statistics, MeanAndMedian) {
  EXPECT_DOUBLE_EQ(mean_of(std::vector<double>{1, 2, 6}), 3.0);
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({10, 1, 1, 1, 100}), 1.0);
  EXPECT_DOUBLE_EQ(median_of({5}), 5.0);
  EXPECT_EQ(median_of({}), 0.0);
  EXPECT_EQ(mean_of(std::vector<double>{}), 0.0);
}

TEST(Collectives, NamesRoundTrip) {
  for (const Collective collective : kAllCollectives) {
    EXPECT_EQ(parse_collective(collective_name(collective)), collective);
  }
  EXPECT_FALSE(parse_collective("all").has_value());
  EXPECT_FALSE(parse_collective("AllReduce").has_value());
}

constexpr plexus_dtype_t kAllDtypes[] = {
    PLEXUS_INT8,   PLEXUS_UINT8,   PLEXUS_INT32,    PLEXUS_UINT32,  PLEXUS_INT64,
    PLEXUS_UINT64, PLEXUS_FLOAT16, PLEXUS_BFLOAT16, PLEXUS_FLOAT32, PLEXUS_FLOAT64};
constexpr plexus_redop_t kAllOps[] = {PLEXUS_SUM, PLEXUS_PROD, PLEXUS_MIN, PLEXUS_MAX, PLEXUS_AVG};

TEST(ElementBits, EncodesSmallIntegersInEveryDtype) {
  EXPECT_EQ(element_bits(PLEXUS_FLOAT32, 3), 0x40400000u);
  EXPECT_EQ(element_bits(PLEXUS_FLOAT64, 3), 0x4008000000000000u);
  EXPECT_EQ(element_bits(PLEXUS_FLOAT16, 3), 0x4200u);
  EXPECT_EQ(element_bits(PLEXUS_BFLOAT16, 3), 0x4040u);
  EXPECT_EQ(element_bits(PLEXUS_INT8, -1), 0xffu);
  EXPECT_EQ(element_bits(PLEXUS_INT32, -1), 0xffffffffu);
  EXPECT_EQ(element_bits(PLEXUS_UINT64, 7), 7u);
}

uint64_t reduced(plexus_dtype_t dtype, plexus_redop_t op, std::vector<int64_t> values) {
  return reduced_element_bits(dtype, op, values);
}

TEST(ExpectedReduction, IntegersWrapInTheElementType) {
  EXPECT_EQ(reduced(PLEXUS_INT8, PLEXUS_SUM, {100, 100}), 0xc8u);  // 200 wraps to -56
  EXPECT_EQ(reduced(PLEXUS_UINT8, PLEXUS_PROD, {16, 16}), 0u);
  EXPECT_EQ(reduced(PLEXUS_INT32, PLEXUS_SUM, {0x7fffffff, 1}), 0x80000000u);
}

TEST(ExpectedReduction, IntegerAverageDividesTheWrappedSumTruncating) {
  EXPECT_EQ(reduced(PLEXUS_INT8, PLEXUS_AVG, {100, 100, 100}), 14u);   // 300 wraps to 44
  EXPECT_EQ(reduced(PLEXUS_INT32, PLEXUS_AVG, {-7, 0}), 0xfffffffdu);  // -3.5 -> -3
  EXPECT_EQ(reduced(PLEXUS_UINT32, PLEXUS_AVG, {1, 2, 2}), 1u);
}

TEST(ExpectedReduction, FloatsDivideInTheirAccumulationType) {
  const float third = 4.0f / 3.0f;
  uint32_t third_bits = 0;
  std::memcpy(&third_bits, &third, sizeof(third));
  EXPECT_EQ(reduced(PLEXUS_FLOAT32, PLEXUS_AVG, {1, 1, 2}), third_bits);
  EXPECT_EQ(reduced(PLEXUS_FLOAT16, PLEXUS_AVG, {1, 2}), 0x3e00u);  // 1.5
  // fp32 4/3 rounded once to bf16: 1.3359375 (0x3fab).
  EXPECT_EQ(reduced(PLEXUS_BFLOAT16, PLEXUS_AVG, {1, 1, 2}), 0x3fabu);
}

TEST(ExpectedReduction, SixteenBitFloatsRoundOnceFromFp32) {
  // 255 + 2 = 257 lies halfway between bf16's 256 and 258: to even gives 256.
  EXPECT_EQ(reduced(PLEXUS_BFLOAT16, PLEXUS_SUM, {255, 2}), element_bits(PLEXUS_BFLOAT16, 256));
  EXPECT_EQ(reduced(PLEXUS_FLOAT16, PLEXUS_SUM, {2047, 2, 2}), element_bits(PLEXUS_FLOAT16, 2052));
}

TEST(ExpectedReduction, MinMaxProd) {
  EXPECT_EQ(reduced(PLEXUS_FLOAT64, PLEXUS_MIN, {5, 3, 9}), element_bits(PLEXUS_FLOAT64, 3));
  EXPECT_EQ(reduced(PLEXUS_INT64, PLEXUS_MAX, {5, 3, 9}), 9u);
  EXPECT_EQ(reduced(PLEXUS_BFLOAT16, PLEXUS_PROD, {2, 1, 2}), element_bits(PLEXUS_BFLOAT16, 4));
}

TEST(DataPattern, ReduceValuesStayWhereEverySumIsExact) {
  for (const plexus_dtype_t dtype : kAllDtypes) {
    for (const int nranks : {1, 2, 3, 8, 32}) {
      const DataPattern pattern(PatternKind::kReduce, dtype, nranks, 0);
      for (size_t phase = 0; phase < DataPattern::kPeriod; ++phase) {
        std::vector<int64_t> values;
        int64_t sum = 0;
        for (int rank = 0; rank < nranks; ++rank) {
          values.push_back(pattern.value_at_phase(rank, phase));
          ASSERT_GE(values.back(), 1);
          ASSERT_LE(values.back(), pattern.max_value());
          sum += values.back();
        }
        ASSERT_EQ(reduced_element_bits(dtype, PLEXUS_SUM, values), element_bits(dtype, sum))
            << "dtype " << dtype << " nranks " << nranks << " phase " << phase;
      }
    }
  }
}

TEST(DataPattern, ProductHasAtMostOneTwoPerElement) {
  for (const int nranks : {1, 2, 7, 64}) {
    const DataPattern pattern(PatternKind::kProduct, PLEXUS_INT8, nranks, 3);
    int phases_without_a_two = 0;
    for (size_t phase = 0; phase < DataPattern::kPeriod; ++phase) {
      int twos = 0;
      for (int rank = 0; rank < nranks; ++rank) {
        const int64_t value = pattern.value_at_phase(rank, phase);
        ASSERT_TRUE(value == 1 || value == 2);
        twos += value == 2 ? 1 : 0;
      }
      ASSERT_LE(twos, 1);
      phases_without_a_two += twos == 0 ? 1 : 0;
    }
    EXPECT_GT(phases_without_a_two, 0);
  }
}

TEST(DataPattern, MoveValuesDifferBetweenRanks) {
  const int nranks = 16;
  const DataPattern pattern(PatternKind::kMove, PLEXUS_BFLOAT16, nranks, 0);
  std::set<std::vector<int64_t>> sequences;
  for (int rank = 0; rank < nranks; ++rank) {
    std::vector<int64_t> sequence;
    for (size_t index = 0; index < 64; ++index) {
      sequence.push_back(pattern.value(rank, index));
      ASSERT_GE(sequence.back(), 1);
      ASSERT_LE(sequence.back(), 100);
    }
    sequences.insert(sequence);
  }
  EXPECT_EQ(sequences.size(), static_cast<size_t>(nranks));
}

TEST(DataPattern, SeedShiftsThePattern) {
  const DataPattern first(PatternKind::kMove, PLEXUS_INT32, 4, 0);
  const DataPattern second(PatternKind::kMove, PLEXUS_INT32, 4, 5);
  EXPECT_EQ(second.value(2, 10), first.value(2, 15));
  EXPECT_EQ(first.value(1, 3), first.value(1, 3 + DataPattern::kPeriod));
}

TEST(CheckData, FilledContributionChecksCleanAndCatchesOneBadElement) {
  for (const plexus_dtype_t dtype : kAllDtypes) {
    const DataPattern pattern(PatternKind::kMove, dtype, 4, 7);
    const size_t count = 3000;             // more than one period
    std::vector<uint64_t> storage(count);  // 8 bytes per element: room for every dtype
    fill_contribution(storage.data(), count, pattern, 2, 11);
    EXPECT_EQ(count_wrong_contribution(storage.data(), count, pattern, 2, 11), 0u) << dtype;
    EXPECT_GT(count_wrong_contribution(storage.data(), count, pattern, 1, 11), 0u) << dtype;
    EXPECT_GT(count_wrong_contribution(storage.data(), count, pattern, 2, 12), 0u) << dtype;
    std::memset(storage.data(), 0, shm::dtype_size(dtype));  // zero is never a valid value
    EXPECT_EQ(count_wrong_contribution(storage.data(), count, pattern, 2, 11), 1u) << dtype;
  }
}

// Builds a reduction result the slow way (one element at a time from every rank's value)
// and checks that count_wrong_reduction accepts it and spots a corrupted element.
TEST(CheckData, ReductionCheckAgreesWithElementWiseReduction) {
  const int nranks = 3;
  const size_t count = 1500;
  const size_t first_index = 40;
  for (const plexus_dtype_t dtype : kAllDtypes) {
    for (const plexus_redop_t op : kAllOps) {
      const DataPattern pattern(op == PLEXUS_PROD ? PatternKind::kProduct : PatternKind::kReduce,
                                dtype, nranks, 9);
      std::vector<uint64_t> storage(count);
      auto* bytes = reinterpret_cast<unsigned char*>(storage.data());
      const size_t element_size = shm::dtype_size(dtype);
      for (size_t i = 0; i < count; ++i) {
        std::vector<int64_t> values;
        for (int rank = 0; rank < nranks; ++rank) {
          values.push_back(pattern.value(rank, first_index + i));
        }
        const uint64_t bits = reduced_element_bits(dtype, op, values);
        std::memcpy(bytes + i * element_size, &bits, element_size);  // little endian
      }
      EXPECT_EQ(count_wrong_reduction(storage.data(), count, pattern, op, first_index), 0u)
          << "dtype " << dtype << " op " << op;
      std::memset(bytes + 5 * element_size, 0, element_size);
      EXPECT_EQ(count_wrong_reduction(storage.data(), count, pattern, op, first_index), 1u)
          << "dtype " << dtype << " op " << op;
    }
  }
}

TEST(Report, FloatColumnsKeepTheirWidth) {
  EXPECT_EQ(format_float_column(1234.5, 7), "1234.50");
  EXPECT_EQ(format_float_column(12345.6, 7), "12345.6");
  EXPECT_EQ(format_float_column(1234567.0, 7), "1234567");
  EXPECT_EQ(format_float_column(123456789.0, 7), "1.2e+08");
  EXPECT_EQ(format_float_column(6.8, 6), "  6.80");
  EXPECT_EQ(format_float_column(0.0, 6), "  0.00");
}

TEST(Report, RowMatchesNcclTestsColumns) {
  ResultRow row;
  row.collective = Collective::kAllReduce;
  row.bytes = 8388608;
  row.count = 2097152;
  row.type = "float";
  row.redop = "sum";
  row.root = -1;
  row.out_of_place = {true, 1234.5, 1234.5, 1200.0, 6.8, 10.2, true, 0};
  row.in_place = {true, 1200.1, 1200.1, 1190.0, 6.99, 10.48, false, 0};
  EXPECT_EQ(format_row(row),
            "     8388608       2097152     float     sum      -1  1234.50    6.80   10.20       0"
            "  1200.10    6.99   10.48     N/A\n");
  row.in_place = VariantResult{};
  EXPECT_NE(format_row(row).find("      N/A     N/A     N/A     N/A\n"), std::string::npos);
}

TEST(Report, FooterSummarisesWrongElementsAndBusBandwidth) {
  ResultRow row;
  row.out_of_place = {true, 1, 1, 1, 2.0, 3.0, true, 5};
  row.in_place = {true, 1, 1, 1, 2.0, 5.0, true, 0};
  TableSummary summary;
  summary.add(row);
  EXPECT_EQ(summary.wrong, 5u);
  EXPECT_DOUBLE_EQ(summary.average_busbw(), 4.0);
  EXPECT_EQ(format_table_footer(summary),
            "# Out of bounds values : 5 FAILED\n# Avg bus bandwidth    : 4\n#\n");
}

}  // namespace
}  // namespace plexus::bench
