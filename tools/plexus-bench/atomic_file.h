// Writing a file so that readers see all of it or none of it.
#pragma once

#include <string>

namespace plexus::bench {

// Writes contents to a temporary file beside path, then renames it over path.
// Throws std::runtime_error naming the file and the OS error.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace plexus::bench
