// plexusd's config file, read strictly with toml++: a syntax error, a duplicate key, a table
// plexusd does not read or a value of a type no option takes is refused, naming the file,
// line and column. What each key means is config_options.cc's business; this only turns the
// TOML into entries that remember their line, so that every later error can name it too.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace plexus::daemon {

// What TOML type a value was written as: an option that takes a number is given one, not a
// string that a C library would read as octal or hex.
enum class ConfigValueKind { kString, kInteger, kFloat, kBoolean };

struct ConfigFileEntry {
  std::vector<std::string> section;  // {} at the top; {"jobs", "trainer"} under [jobs.trainer]
  std::string key;
  // As text: a string as it is, a number or boolean as TOML writes it; an array gives one
  // value per element (a repeatable option, e.g. job = ["a=bulk", "b=latency"]).
  std::vector<std::string> values;
  ConfigValueKind kind = ConfigValueKind::kString;  // of the value (an array's first element)
  int line = 0;
};

// A floating-point value as the shortest text that reads back as the same number.
std::string number_text(double value);

// The entries of `path` (in the order of their lines), or the error as
// "PATH:LINE:COLUMN: what".
common::Result<std::vector<ConfigFileEntry>> read_config_file(const std::string& path);

}  // namespace plexus::daemon
