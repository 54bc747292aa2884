// Small helpers shared by subcommands: parsing id lists and reading inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tokenmill::cli {

// Parses "1,2,3" (spaces allowed) into ids; throws Error naming the bad item.
std::vector<int32_t> parse_id_list(const std::string& text);
// "1,2,3"
std::string format_id_list(const std::vector<int32_t>& ids);
// Whole file as bytes; throws Error naming the path.
std::string read_text_file(const std::string& path);

}  // namespace tokenmill::cli
