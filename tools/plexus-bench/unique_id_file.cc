#include "tools/plexus-bench/unique_id_file.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tools/plexus-bench/atomic_file.h"

namespace plexus::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(10);

}  // namespace

std::string unique_id_to_hex(const plexus_unique_id_t& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * sizeof(id.internal));
  for (const char byte : id.internal) {
    const auto value = static_cast<unsigned char>(byte);
    text.push_back(kDigits[value >> 4]);
    text.push_back(kDigits[value & 0xf]);
  }
  return text;
}

std::optional<plexus_unique_id_t> unique_id_from_hex(std::string_view text) {
  plexus_unique_id_t id{};
  if (text.size() != 2 * sizeof(id.internal)) return std::nullopt;
  for (size_t index = 0; index < sizeof(id.internal); ++index) {
    unsigned value = 0;
    const char* first = text.data() + 2 * index;
    const auto [stop, error] = std::from_chars(first, first + 2, value, 16);
    if (error != std::errc() || stop != first + 2) return std::nullopt;
    id.internal[index] = static_cast<char>(value);
  }
  return id;
}

void publish_unique_id(const std::string& path, const plexus_unique_id_t& id) {
  write_file_atomically(path, unique_id_to_hex(id) + "\n");
}

plexus_unique_id_t wait_for_unique_id(const std::string& path, Clock::duration patience) {
  const Clock::time_point deadline = Clock::now() + patience;
  for (;;) {
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      std::string content = text.str();
      while (!content.empty() && (content.back() == '\n' || content.back() == ' ')) {
        content.pop_back();
      }
      if (auto id = unique_id_from_hex(content)) return *id;
      throw std::runtime_error(path + " does not hold a plexus-bench unique id");
    }
    if (Clock::now() >= deadline) {
      throw std::runtime_error(
          "no unique id appeared in " + path + " within " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(patience).count()) +
          " s (rank 0 writes it; is rank 0 running, with the same id file?)");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace plexus::bench
