// The reduction kernels plexusd embeds (built where nvcc is): a CUDA fatbinary, holding
// one kernel under each name the launcher looks up, so that a renamed kernel or a dtype
// or op added on one side only fails here, not on a GPU in the field.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>

#include "daemon/gpu/reduce_kernel_image.h"
#include "plexus/plexus.h"

namespace plexus::test {
namespace {

TEST(ReduceKernelImageTest, IsAFatbinaryWithAKernelForEveryDtypeAndOp) {
  const auto image = daemon::gpu::reduce_kernel_image();
  ASSERT_GT(image.size(), 1024u);
  uint32_t magic = 0;
  std::memcpy(&magic, image.data(), sizeof(magic));
  EXPECT_EQ(magic, 0xba55ed50u) << "not a CUDA fatbinary";
  const std::string_view bytes(reinterpret_cast<const char*>(image.data()), image.size());
  for (int d = 0; d < PLEXUS_NUM_DTYPES; ++d) {
    for (int o = 0; o < PLEXUS_NUM_REDOPS; ++o) {
      const std::string name = "plexus_reduce_" + std::to_string(d) + "_" + std::to_string(o);
      EXPECT_NE(bytes.find(name + '\0'), std::string_view::npos) << name << " is not in the image";
    }
  }
  EXPECT_EQ(bytes.find("plexus_reduce_" + std::to_string(PLEXUS_NUM_DTYPES) + "_0"),
            std::string_view::npos)
      << "a kernel for a dtype plexus.h does not have";
}

}  // namespace
}  // namespace plexus::test
