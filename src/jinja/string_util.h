// Python str algorithms on UTF-8 text (string_util.cc), shared by the
// string methods and the filters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace tokenmill::jinja {

int64_t code_point_count(std::string_view s);
bool is_python_space(char c);
// chars == nullptr: Python's whitespace.
std::string strip_chars(const std::string& s, const std::string* chars, bool left, bool right);
// sep == nullptr: runs of whitespace, empty parts dropped (Python's split()).
std::vector<std::string> python_split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right);
// Throws a kLimit TemplateError when the result would exceed max_bytes.
std::string replace_all(const std::string& s, const std::string& old, const std::string& with, int64_t count,
                        size_t max_bytes);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
// Python's str.upper()/lower() for Latin, Greek and Cyrillic (case_map.cc).
std::string to_upper(const std::string& s);
std::string to_lower(const std::string& s);
std::string python_title(const std::string& s);
bool is_cased(const std::string& code_point);
std::string capitalize(const std::string& s);
int64_t count_occurrences(const std::string& s, const std::string& sub);
std::string python_format(const std::string& format, const CallArgs& args);
// Python's `format % args`; throws a kLimit TemplateError past max_bytes.
std::string percent_format(const std::string& format, const std::vector<Value>& args, size_t max_bytes);
std::vector<std::string> split_lines(const std::string& s, bool keepends);
std::string zfill(const std::string& s, int64_t width);
std::string center(const std::string& s, int64_t width, size_t max_bytes, const std::string& fill = " ");
// isdigit, isalpha, isspace, isalnum, islower, isupper, isnumeric, isdecimal.
bool char_class_test(const std::string& s, const std::string& method);

}  // namespace tokenmill::jinja
