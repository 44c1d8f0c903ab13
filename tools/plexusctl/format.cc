#include "tools/plexusctl/format.h"

#include <cstdio>

namespace plexus::ctl {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

std::string human_us(double us) {
  char text[32];
  if (us < 1000) {
    std::snprintf(text, sizeof(text), "%.0f us", us);
  } else if (us < 1e6) {
    std::snprintf(text, sizeof(text), "%.1f ms", us / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%.2f s", us / 1e6);
  }
  return text;
}

}  // namespace plexus::ctl
