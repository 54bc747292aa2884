// Read-only memory map of a whole file. Model weights are used in place from
// the map, so the object must outlive every view into it. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tokenmill {

class MappedFile {
 public:
  // Throws Error naming the path when the file cannot be opened or mapped.
  static MappedFile open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Tells the kernel that the whole pages inside [data, data + bytes) of a
// read-only file map will not be needed soon: they leave the process's
// resident set (they stay in the page cache and come back on the next
// read). Advisory; errors are ignored.
void release_mapped_pages(const void* data, size_t bytes);

}  // namespace tokenmill
