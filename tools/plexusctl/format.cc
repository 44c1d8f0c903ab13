#include "tools/plexusctl/format.h"

#include <cstdio>

namespace plexus::ctl {

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
