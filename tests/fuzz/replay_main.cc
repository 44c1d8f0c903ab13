// The fuzz targets' driver where libFuzzer is not used (gcc builds, ctest): runs the
// target's built-in seeds, every mutation of them by one flipped byte or a cut, and any
// files given; with --write-seeds DIR it writes the seeds there as libFuzzer's corpus.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_seeds.h"

int main(int argc, char** argv) {
  const auto seeds = plexus_fuzz_seeds();
  if (argc == 3 && std::strcmp(argv[1], "--write-seeds") == 0) {
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream out(std::string(argv[2]) + "/seed" + std::to_string(i), std::ios::binary);
      out.write(reinterpret_cast<const char*>(seeds[i].data()),
                static_cast<std::streamsize>(seeds[i].size()));
    }
    return 0;
  }
  size_t runs = 0;
  for (const auto& seed : seeds) {
    LLVMFuzzerTestOneInput(seed.data(), seed.size());
    ++runs;
    for (size_t at = 0; at < seed.size(); ++at) {
      std::vector<uint8_t> flipped = seed;
      flipped[at] ^= static_cast<uint8_t>(0x5a + at);
      LLVMFuzzerTestOneInput(flipped.data(), flipped.size());
      LLVMFuzzerTestOneInput(seed.data(), at);  // every cut
      runs += 2;
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(data.data(), data.size());
    ++runs;
  }
  std::printf("%zu inputs ran without a fault\n", runs);
  return 0;
}
