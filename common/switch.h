// Settings that are on, off, or (for some) decided by the daemon: typed, so that a setting
// is compared with an enumerator rather than a string in every place that reads it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace plexus::common {

enum class OnOff : uint8_t { kOff, kOn };
enum class OnOffAuto : uint8_t { kOff, kOn, kAuto };

constexpr std::string_view switch_name(OnOff value) { return value == OnOff::kOn ? "on" : "off"; }
constexpr std::string_view switch_name(OnOffAuto value) {
  switch (value) {
    case OnOffAuto::kOn:
      return "on";
    case OnOffAuto::kOff:
      return "off";
    case OnOffAuto::kAuto:
      break;
  }
  return "auto";
}

// The words each accepts, for command-line and config-file parsers.
inline std::map<std::string, OnOff> on_off_words() {
  return {{"on", OnOff::kOn}, {"off", OnOff::kOff}};
}
inline std::map<std::string, OnOffAuto> on_off_auto_words() {
  return {{"on", OnOffAuto::kOn}, {"off", OnOffAuto::kOff}, {"auto", OnOffAuto::kAuto}};
}

}  // namespace plexus::common
