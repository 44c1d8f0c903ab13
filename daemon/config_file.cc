#include "daemon/config_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>

namespace plexus::daemon {
namespace {

std::string where(const std::string& path, const toml::source_region& at) {
  return path + ":" + std::to_string(at.begin.line) + ":" + std::to_string(at.begin.column) + ": ";
}

// A scalar value as text, and its kind.
struct Scalar {
  std::string text;
  ConfigValueKind kind = ConfigValueKind::kString;
};

// A scalar's text and kind, or why it is none (a date, a time, a table where a value
// belongs).
common::Result<Scalar> scalar_text(const toml::node& node, const std::string& path,
                                   const std::string& key) {
  if (const auto* s = node.as_string()) return Scalar{s->get(), ConfigValueKind::kString};
  if (const auto* i = node.as_integer())
    return Scalar{std::to_string(i->get()), ConfigValueKind::kInteger};
  if (const auto* f = node.as_floating_point())
    return Scalar{number_text(f->get()), ConfigValueKind::kFloat};
  if (const auto* b = node.as_boolean())
    return Scalar{b->get() ? "true" : "false", ConfigValueKind::kBoolean};
  return common::fail(where(path, node.source()) + "'" + key +
                      "' takes a string, a number or true/false, not a " +
                      std::string(node.is_table()   ? "table"
                                  : node.is_array() ? "nested array"
                                                    : "date/time"));
}

// One key and its value (a scalar, or an array of scalars) as an entry.
common::Result<ConfigFileEntry> entry_of(const std::vector<std::string>& section,
                                         const std::string& key, const toml::node& node,
                                         const std::string& path) {
  ConfigFileEntry entry{
      section, key, {}, ConfigValueKind::kString, static_cast<int>(node.source().begin.line)};
  if (const auto* array = node.as_array()) {
    for (const toml::node& element : *array) {
      common::Result<Scalar> scalar = scalar_text(element, path, key);
      if (!scalar) return common::fail(scalar.error());
      entry.values.push_back(std::move(scalar->text));
      if (entry.values.size() == 1) entry.kind = scalar->kind;
    }
  } else {
    common::Result<Scalar> scalar = scalar_text(node, path, key);
    if (!scalar) return common::fail(scalar.error());
    entry.values.push_back(std::move(scalar->text));
    entry.kind = scalar->kind;
  }
  return entry;
}

}  // namespace

std::string number_text(double value) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return ec == std::errc() ? std::string(text, end) : std::to_string(value);
}

common::Result<std::vector<ConfigFileEntry>> read_config_file(const std::string& path) {
  std::vector<ConfigFileEntry> entries;
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    // toml++ names a missing file as a parse error at line 0: say it plainly.
    if (e.source().begin.line == 0) return common::fail(path + ": " + std::string(e.description()));
    return common::fail(where(path, e.source()) + std::string(e.description()));
  }
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (!node.is_table()) {
      common::Result<ConfigFileEntry> entry = entry_of({}, name, node, path);
      if (!entry) return common::fail(entry.error());
      entries.push_back(entry.take());
      continue;
    }
    if (name != "jobs") {
      return common::fail(where(path, node.source()) + "[" + name +
                          "] is not a table plexusd reads (its only tables are [jobs.NAME]; "
                          "every other setting is a key at the top of the file)");
    }
    for (const auto& [job, settings] : *node.as_table()) {
      if (!settings.is_table()) {
        return common::fail(where(path, settings.source()) + "'jobs." + std::string(job.str()) +
                            "' must be a table: [jobs." + std::string(job.str()) +
                            "] with class, weight, ...");
      }
      for (const auto& [field, value] : *settings.as_table()) {
        common::Result<ConfigFileEntry> entry =
            entry_of({"jobs", std::string(job.str())}, std::string(field.str()), value, path);
        if (!entry) return common::fail(entry.error());
        entries.push_back(entry.take());
      }
    }
  }
  std::stable_sort(
      entries.begin(), entries.end(),
      [](const ConfigFileEntry& a, const ConfigFileEntry& b) { return a.line < b.line; });
  return entries;
}

}  // namespace plexus::daemon
