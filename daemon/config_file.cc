#include "daemon/config_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>

namespace plexus::daemon {
namespace {

std::string where(const std::string& path, const toml::source_region& at) {
  return path + ":" + std::to_string(at.begin.line) + ":" + std::to_string(at.begin.column) + ": ";
}

// A scalar's text and kind, or "" with *error set (a date, a time, a table where a value
// belongs).
std::string scalar_text(const toml::node& node, const std::string& path, const std::string& key,
                        ConfigValueKind* kind, std::string* error) {
  if (const auto* s = node.as_string()) {
    *kind = ConfigValueKind::kString;
    return s->get();
  }
  if (const auto* i = node.as_integer()) {
    *kind = ConfigValueKind::kInteger;
    return std::to_string(i->get());
  }
  if (const auto* f = node.as_floating_point()) {
    *kind = ConfigValueKind::kFloat;
    return number_text(f->get());
  }
  if (const auto* b = node.as_boolean()) {
    *kind = ConfigValueKind::kBoolean;
    return b->get() ? "true" : "false";
  }
  *error = where(path, node.source()) + "'" + key +
           "' takes a string, a number or true/false, not a " +
           std::string(node.is_table()   ? "table"
                       : node.is_array() ? "nested array"
                                         : "date/time");
  return {};
}

// One key and its value (a scalar, or an array of scalars) into `entries`.
std::string add_entry(const std::vector<std::string>& section, const std::string& key,
                      const toml::node& node, const std::string& path,
                      std::vector<ConfigFileEntry>* entries) {
  ConfigFileEntry entry{
      section, key, {}, ConfigValueKind::kString, static_cast<int>(node.source().begin.line)};
  std::string error;
  if (const auto* array = node.as_array()) {
    for (const toml::node& element : *array) {
      ConfigValueKind kind = ConfigValueKind::kString;
      entry.values.push_back(scalar_text(element, path, key, &kind, &error));
      if (!error.empty()) return error;
      if (entry.values.size() == 1) entry.kind = kind;
    }
  } else {
    entry.values.push_back(scalar_text(node, path, key, &entry.kind, &error));
    if (!error.empty()) return error;
  }
  entries->push_back(std::move(entry));
  return {};
}

}  // namespace

std::string number_text(double value) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return ec == std::errc() ? std::string(text, end) : std::to_string(value);
}

std::string read_config_file(const std::string& path, std::vector<ConfigFileEntry>* entries) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    // toml++ names a missing file as a parse error at line 0: say it plainly.
    if (e.source().begin.line == 0) return path + ": " + std::string(e.description());
    return where(path, e.source()) + std::string(e.description());
  }
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (!node.is_table()) {
      if (std::string error = add_entry({}, name, node, path, entries); !error.empty())
        return error;
      continue;
    }
    if (name != "jobs") {
      return where(path, node.source()) + "[" + name +
             "] is not a table plexusd reads (its only tables are [jobs.NAME]; every other "
             "setting is a key at the top of the file)";
    }
    for (const auto& [job, settings] : *node.as_table()) {
      if (!settings.is_table()) {
        return where(path, settings.source()) + "'jobs." + std::string(job.str()) +
               "' must be a table: [jobs." + std::string(job.str()) + "] with class, weight, ...";
      }
      for (const auto& [field, value] : *settings.as_table()) {
        if (std::string error = add_entry({"jobs", std::string(job.str())},
                                          std::string(field.str()), value, path, entries);
            !error.empty()) {
          return error;
        }
      }
    }
  }
  std::stable_sort(
      entries->begin(), entries->end(),
      [](const ConfigFileEntry& a, const ConfigFileEntry& b) { return a.line < b.line; });
  return {};
}

}  // namespace plexus::daemon
