// write_file_durably and append_durably: the durable-write recipe, written once.
#include "engine/io/durable.h"

namespace nj {

std::string durable_temp_path(const std::string& path) {
  return path + ".tmp";
}

Status write_file_durably(Env& env, const std::string& path, const FileFiller& fill) {
  const std::string tmp = durable_temp_path(path);
  auto fail = [&](const Status& s, const char* step) {
    (void)env.remove(tmp);  // best effort: a leftover temp is truncated by the next write
    return s.with_context(std::string("writing ") + path + " durably (" + step + ")");
  };
  auto file = env.new_writable_file(tmp);
  if (!file.ok()) return fail(file.status(), "create temp");
  if (Status s = fill(**file); !s.ok()) return fail(s, "write");
  if (Status s = (*file)->sync(); !s.ok()) return fail(s, "fsync");
  if (Status s = (*file)->close(); !s.ok()) return fail(s, "close");
  if (Status s = env.rename(tmp, path); !s.ok()) return fail(s, "rename");
  if (Status s = env.sync_dir(dir_name(path)); !s.ok())
    return s.with_context(std::string("writing ") + path +
                          " durably (fsync directory after rename)");
  return Status();
}

Status write_file_durably(Env& env, const std::string& path, std::string_view bytes) {
  return write_file_durably(env, path, [bytes](WritableFile& f) { return f.append(bytes); });
}

Status append_durably(WritableFile& file, std::span<const std::string_view> pieces) {
  for (std::string_view p : pieces) {
    if (p.empty()) continue;
    NJ_RETURN_IF_ERROR(file.append(p).with_context("appending to " + file.path()));
  }
  return file.sync().with_context("appending to " + file.path());
}

}  // namespace nj
