// plexusd's settings from its command line and config file (CLI11 for the flags, toml++ for
// the file: config_file.h), and a Config written back as that file's TOML. plexusd reads
// them at start, and again on SIGHUP or plexusctl config reload, with the same flags: a
// flag overrides the file both times.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "daemon/config.h"

namespace plexus::daemon {

struct ConfigLoad {
  Config config;
  std::string file;    // the --config file ("" without one)
  int exit_code = -1;  // >= 0: plexusd exits now with it (--help: 0; a bad flag or file: 1)
  std::string output;  // what --help prints
  // Why not, naming the flag, or the file, line and key ("PATH:LINE: stall-ms: ...").
  std::string error;
};

// `args`: the command line without the program's name. An unknown key in the file is an
// error (a misspelt setting is never ignored); keys may use '_' for '-'.
ConfigLoad load_config(const std::vector<std::string>& args);

// Every setting's value in `config` by key (the option's name without dashes, or
// "jobs.NAME.FIELD"), as text: what plexusctl config shows and a reload compares.
std::map<std::string, std::string> config_values(const Config& config);

// `config` as a config file plexusd would read back (TOML): one `key = value` per option,
// then a [jobs.NAME] table per job.
std::string config_text(const Config& config);

}  // namespace plexus::daemon
