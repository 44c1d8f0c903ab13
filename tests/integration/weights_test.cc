// The weight store through libplexus against a plexusd process: a publisher and two pullers
// at once (every pull a whole version, never going back), pulls that wait for a newer
// version, what is refused and how it is said, a puller killed while it waits, and
// plexusctl models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "plexus/plexus.h"
#include "tests/integration/command_output.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/shared_daemon_test.h"

namespace plexus::test {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kVersions = 24;

// A version's bytes: every byte of every tensor is the version's low byte, but for the
// first eight, which hold the version itself (so a mix of two versions shows).
void fill(std::byte* data, size_t bytes, uint64_t version) {
  std::memset(data, static_cast<int>(version & 0xFF), bytes);
  std::memcpy(data, &version, sizeof version);
}

std::string check(const std::byte* data, size_t bytes, uint64_t version, const char* tensor) {
  uint64_t stamped = 0;
  std::memcpy(&stamped, data, sizeof stamped);
  if (stamped != version) {
    return std::string(tensor) + " is stamped " + std::to_string(stamped) + " in a pull of " +
           std::to_string(version);
  }
  for (size_t i = sizeof version; i < bytes; ++i) {
    if (data[i] != static_cast<std::byte>(version & 0xFF)) {
      return std::string(tensor) + " byte " + std::to_string(i) + " is not version " +
             std::to_string(version) + "'s: a torn pull";
    }
  }
  return "";
}

std::string last_error() { return plexus_get_last_error(); }

class WeightsTest : public SharedDaemonTest {};

TEST_F(WeightsTest, PullsUnderConcurrentPublishesAreWholeVersionsThatNeverGoBack) {
  const std::string model = "policy-" + std::to_string(::getpid());
  auto results =
      run_ranks(socket(), 3, [&](int rank, int, const plexus_unique_id_t&) -> std::string {
        // A tensor in the pool (copied by the daemon directly) and one outside it (staged).
        const size_t pool_bytes = (3 << 20) + 100;
        const size_t heap_bytes = 300 * 1000 + 7;
        void* pooled = nullptr;
        if (plexus_alloc(&pooled, pool_bytes) != PLEXUS_SUCCESS)
          return "plexus_alloc: " + last_error();
        std::vector<std::byte> heap(heap_bytes);
        plexus_weight_tensor_t tensors[] = {{"layers.0.weight", pooled, pool_bytes},
                                            {"layers.0.bias", heap.data(), heap_bytes}};
        auto* pooled_bytes = static_cast<std::byte*>(pooled);
        if (rank == 0) {
          for (uint64_t v = 1; v <= kVersions; ++v) {
            fill(pooled_bytes, pool_bytes, v);
            fill(heap.data(), heap_bytes, v);
            if (plexus_weights_publish(model.c_str(), v, tensors, 2) != PLEXUS_SUCCESS) {
              return "publish " + std::to_string(v) + ": " + last_error();
            }
            // Overwritten at once: the daemon holds its own copy.
            std::memset(pooled, 0xEE, pool_bytes);
          }
          return "";
        }
        uint64_t last = 0;
        int pulls = 0;
        while (last < kVersions) {
          uint64_t got = 0;
          if (plexus_weights_pull(model.c_str(), 0, last, 30000, tensors, 2, &got) !=
              PLEXUS_SUCCESS) {
            return "pull newer than " + std::to_string(last) + ": " + last_error();
          }
          if (got <= last) {
            return "pulled version " + std::to_string(got) + " after " + std::to_string(last);
          }
          if (std::string e = check(pooled_bytes, pool_bytes, got, "layers.0.weight"); !e.empty())
            return e;
          if (std::string e = check(heap.data(), heap_bytes, got, "layers.0.bias"); !e.empty())
            return e;
          last = got;
          ++pulls;
        }
        uint64_t latest = 0;
        if (plexus_weights_latest(model.c_str(), &latest) != PLEXUS_SUCCESS ||
            latest != kVersions) {
          return "latest is " + std::to_string(latest) + ": " + last_error();
        }
        // An old version by number: kept (the newest two), or refused saying which are.
        uint64_t got = 0;
        if (plexus_weights_pull(model.c_str(), kVersions - 1, 0, 0, tensors, 2, &got) !=
                PLEXUS_SUCCESS ||
            got != kVersions - 1) {
          return "pull of version " + std::to_string(kVersions - 1) + ": " + last_error();
        }
        if (std::string e = check(pooled_bytes, pool_bytes, got, "layers.0.weight"); !e.empty())
          return e;
        if (plexus_weights_pull(model.c_str(), 1, 0, 0, tensors, 2, &got) !=
                PLEXUS_ERR_INVALID_ARGUMENT ||
            last_error().find("is not kept (kept now: 23, 24)") == std::string::npos) {
          return "a pull of dropped version 1 was not refused as such: " + last_error();
        }
        return pulls > 0 ? "" : "no pull";
      });
  EXPECT_EQ(failures(results), "");
}

TEST_F(WeightsTest, RefusalsNameTheFieldAndWhatToChange) {
  const std::string model = "refusals-" + std::to_string(::getpid());
  auto results = run_ranks(socket(), 1, [&](int, int, const plexus_unique_id_t&) -> std::string {
    std::vector<std::byte> a(1000), b(64);
    plexus_weight_tensor_t one[] = {{"a", a.data(), a.size()}};
    uint64_t got = 0;
    // Nothing published yet: a pull that will not wait says so; one that waits times out.
    if (plexus_weights_pull(model.c_str(), 0, 0, 0, one, 1, &got) != PLEXUS_ERR_TIMEOUT ||
        last_error().find("asked not to wait") == std::string::npos) {
      return "an empty model's pull: " + last_error();
    }
    const auto started = std::chrono::steady_clock::now();
    if (plexus_weights_pull(model.c_str(), 0, 0, 300, one, 1, &got) != PLEXUS_ERR_TIMEOUT ||
        last_error().find("came in time") == std::string::npos) {
      return "a waiting pull's timeout: " + last_error();
    }
    if (std::chrono::steady_clock::now() - started < std::chrono::milliseconds(300)) {
      return "the pull gave up before its timeout";
    }
    if (plexus_weights_publish(model.c_str(), 3, one, 1) != PLEXUS_SUCCESS) return last_error();
    if (plexus_weights_publish(model.c_str(), 2, one, 1) != PLEXUS_ERR_INVALID_ARGUMENT ||
        last_error().find("not newer than the model's newest complete version, 3") ==
            std::string::npos) {
      return "a version going back: " + last_error();
    }
    plexus_weight_tensor_t twice[] = {{"a", a.data(), a.size()}, {"a", b.data(), b.size()}};
    if (plexus_weights_publish(model.c_str(), 4, twice, 2) != PLEXUS_ERR_INVALID_ARGUMENT ||
        last_error().find("names tensor 'a' twice") == std::string::npos) {
      return "a repeated name: " + last_error();
    }
    plexus_weight_tensor_t wrong_size[] = {{"a", b.data(), b.size()}};
    if (plexus_weights_pull(model.c_str(), 0, 0, 0, wrong_size, 1, &got) !=
            PLEXUS_ERR_INVALID_ARGUMENT ||
        last_error().find("has 1000 bytes, and the pull gives 64") == std::string::npos) {
      return "a size mismatch: " + last_error();
    }
    plexus_weight_tensor_t unknown[] = {{"missing", b.data(), b.size()}};
    if (plexus_weights_pull(model.c_str(), 0, 0, 0, unknown, 1, &got) !=
            PLEXUS_ERR_INVALID_ARGUMENT ||
        last_error().find("has no tensor 'missing'") == std::string::npos) {
      return "an unknown tensor: " + last_error();
    }
    if (plexus_weights_publish(nullptr, 1, one, 1) != PLEXUS_ERR_INVALID_ARGUMENT) {
      return "a NULL model was not refused";
    }
    if (plexus_weights_publish("bad name\n", 1, one, 1) != PLEXUS_ERR_INVALID_ARGUMENT ||
        last_error().find("printable ASCII without spaces (byte 32") == std::string::npos) {
      return "a model name with a space: " + last_error();
    }
    // What it refused changed nothing: version 3 is still whole.
    std::vector<std::byte> out(1000, std::byte{1});
    plexus_weight_tensor_t back[] = {{"a", out.data(), out.size()}};
    if (plexus_weights_pull(model.c_str(), 0, 0, 0, back, 1, &got) != PLEXUS_SUCCESS || got != 3 ||
        out != a) {
      return "version 3 after the refusals: " + last_error();
    }
    return "";
  });
  EXPECT_EQ(failures(results), "");
}

// A state_dict of thousands of tensors: more names than one control request holds. The
// publish goes in batches (shards of the version) and the pull in batches of the one version
// the first got; an explicit shard that large is refused saying what to do.
TEST_F(WeightsTest, ATableLargerThanARequestGoesInBatchesOfOneVersion) {
  const std::string model = "large-table-" + std::to_string(::getpid());
  auto results = run_ranks(socket(), 1, [&](int, int, const plexus_unique_id_t&) -> std::string {
    constexpr size_t kTensors = 3000;
    std::vector<std::string> names;
    std::vector<uint64_t> values(kTensors), out(kTensors, 0);
    std::vector<plexus_weight_tensor_t> in_table, out_table;
    for (size_t i = 0; i < kTensors; ++i) {
      names.push_back("model.layers." + std::to_string(i) + ".self_attn.q_proj.weight");
      values[i] = i * 7 + 1;
    }
    for (size_t i = 0; i < kTensors; ++i) {
      in_table.push_back({names[i].c_str(), &values[i], sizeof(uint64_t)});
      out_table.push_back({names[i].c_str(), &out[i], sizeof(uint64_t)});
    }
    if (plexus_weights_publish(model.c_str(), 1, in_table.data(), kTensors) != PLEXUS_SUCCESS) {
      return "publish: " + last_error();
    }
    uint64_t got = 0;
    if (plexus_weights_pull(model.c_str(), 0, 0, 0, out_table.data(), kTensors, &got) !=
            PLEXUS_SUCCESS ||
        got != 1) {
      return "pull: " + last_error();
    }
    if (out != values) return "the pulled values differ from the published ones";
    if (plexus_weights_publish_shard(model.c_str(), 2, 0, 2, in_table.data(), kTensors) !=
            PLEXUS_ERR_INVALID_ARGUMENT ||
        last_error().find("publish it as more shards") == std::string::npos) {
      return "an explicit shard too large for a request: " + last_error();
    }
    return "";
  });
  EXPECT_EQ(failures(results), "");
}

TEST(WeightsCapTest, APublishPastTheCapIsRefusedWithPlexusErrNoMemoryAndASentence) {
  DaemonProcess daemon({"--weight-store-bytes", std::to_string(3 << 20)});
  auto results =
      run_ranks(daemon.socket_path(), 1, [](int, int, const plexus_unique_id_t&) -> std::string {
        std::vector<std::byte> big(2 << 20, std::byte{7});
        plexus_weight_tensor_t t[] = {{"w", big.data(), big.size()}};
        if (plexus_weights_publish("capped", 1, t, 1) != PLEXUS_SUCCESS)
          return "v1: " + last_error();
        // Two kept versions would need 4 MiB of 3: the second is refused, the first stays.
        if (plexus_weights_publish("capped", 2, t, 1) != PLEXUS_ERR_NO_MEMORY) {
          return "v2 past the cap was not refused for memory: " + last_error();
        }
        const std::string why = last_error();
        for (const char* part : {"version 2 of model 'capped' refused", "of its cap of 3.0 MiB",
                                 "--weight-store-bytes", "--weight-versions"}) {
          if (why.find(part) == std::string::npos)
            return "the refusal lacks '" + std::string(part) + "': " + why;
        }
        uint64_t latest = 0;
        if (plexus_weights_latest("capped", &latest) != PLEXUS_SUCCESS || latest != 1) {
          return "latest after the refusal: " + std::to_string(latest);
        }
        return "";
      });
  EXPECT_EQ(failures(results), "");
  const std::string models =
      run_command({PLEXUSCTL_PATH, "--socket", daemon.socket_path(), "models"}).out;
  EXPECT_THAT(models, HasSubstr("capped"));
  EXPECT_THAT(models, HasSubstr("2.0 MiB held (0 B spare) of a 3.0 MiB cap"));
  EXPECT_THAT(models, HasSubstr("complete"));
  EXPECT_TRUE(daemon.alive());
}

// What `plexusctl models --json` says of the pulls waiting for `model`: -1 if it is not listed.
int waiting_pulls(const std::string& socket, const std::string& model) {
  const std::string out = run_command({PLEXUSCTL_PATH, "--socket", socket, "models", "--json"}).out;
  const size_t at = out.find("\"name\": \"" + model + "\"");
  if (at == std::string::npos) return -1;
  const std::string key = "\"waiting_pulls\": ";
  const size_t w = out.find(key, at);
  return w == std::string::npos ? -1 : std::atoi(out.c_str() + w + key.size());
}

// Polls `check` every 20 ms for up to 30 s.
bool eventually(const std::function<bool()>& check) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A puller killed while its pull waits: the daemon forgets the wait (plexusctl shows it gone)
// and serves the next publish and pull. Each step waits for the one before by what the
// daemon reports, not by time.
TEST_F(WeightsTest, APullerKilledWhileWaitingIsForgottenAndDisturbsNoOne) {
  const std::string model = "killed-" + std::to_string(::getpid());
  const std::string go = ::testing::TempDir() + "/weights-go-" + std::to_string(::getpid());
  std::remove(go.c_str());
  std::string parent_error;
  auto results = run_ranks(
      socket(), 2,
      [&](int rank, int, const plexus_unique_id_t&) -> std::string {
        std::vector<std::byte> a(4096, std::byte{9});
        plexus_weight_tensor_t t[] = {{"a", a.data(), a.size()}};
        uint64_t got = 0;
        if (rank == 1) {  // waits for version 2, and is killed meanwhile
          if (!eventually([&] {
                return plexus_weights_latest(model.c_str(), &got) == PLEXUS_SUCCESS && got == 1;
              })) {
            return "version 1 never came";
          }
          plexus_weights_pull(model.c_str(), 0, 1, 60000, t, 1, &got);
          return "the waiting pull returned before it was killed: " + last_error();
        }
        if (plexus_weights_publish(model.c_str(), 1, t, 1) != PLEXUS_SUCCESS) return last_error();
        if (!eventually([&] { return ::access(go.c_str(), F_OK) == 0; })) return "no go";
        if (plexus_weights_publish(model.c_str(), 2, t, 1) != PLEXUS_SUCCESS) return last_error();
        if (plexus_weights_pull(model.c_str(), 0, 1, 1000, t, 1, &got) != PLEXUS_SUCCESS ||
            got != 2) {
          return "a pull after the kill: " + last_error();
        }
        return "";
      },
      std::chrono::seconds(90),
      [&](const std::vector<pid_t>& pids) {
        if (!eventually([&] { return waiting_pulls(socket(), model) == 1; })) {
          parent_error = "the pull never showed as waiting";
        }
        ::kill(pids[1], SIGKILL);
        if (parent_error.empty() &&
            !eventually([&] { return waiting_pulls(socket(), model) == 0; })) {
          parent_error = "the killed puller's wait was never forgotten";
        }
        std::FILE* f = std::fopen(go.c_str(), "w");
        if (f != nullptr) std::fclose(f);
      });
  std::remove(go.c_str());
  EXPECT_EQ(parent_error, "");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok) << results[0].message;
  EXPECT_FALSE(results[1].ok);
  EXPECT_THAT(results[1].message, HasSubstr("signal"));
}

}  // namespace
}  // namespace plexus::test
