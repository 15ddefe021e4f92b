// Read-only memory maps of file ranges: large headers and indexes are parsed straight
// from the page cache, with no copy and no zero-filled buffer to fault in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace nj {

class MappedFile {
 public:
  // Maps [offset, offset + length) of `path` read-only, prefaulted. NotFound / IOError with
  // the path; InvalidArgument when the range runs past the end of the file.
  static Result<MappedFile> map(const std::string& path, uint64_t offset, uint64_t length);

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {data_, length_}; }

 private:
  void* base_ = nullptr;     // page-aligned start of the mapping
  size_t map_length_ = 0;
  const char* data_ = nullptr;
  size_t length_ = 0;
};

}  // namespace nj
