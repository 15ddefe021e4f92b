// Helpers for tests that need a model directory on disk: copies of the committed golden
// fixtures (tests/golden/) that a test may damage, and safetensors header surgery.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace nj::testing {

inline std::string golden_dir(const std::string& name) {
  return std::string(NJ_SOURCE_DIR) + "/tests/golden/" + name;
}

// A fresh temporary directory, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nightjar-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Copies a golden fixture into `dir` (overwriting).
inline void copy_golden(const std::string& name, const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(golden_dir(name)))
    std::filesystem::copy_file(e.path(), dir + "/" + e.path().filename().string(),
                               std::filesystem::copy_options::overwrite_existing);
}

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Rewrites a safetensors file's JSON header through `edit`, keeping the data bytes.
inline void edit_header(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  std::string bytes = read_all(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  edit(header);
  std::string text = header.dump();
  while ((8 + text.size()) % 8) text.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  write_all(path, out + text + bytes.substr(8 + n));
}

}  // namespace nj::testing
