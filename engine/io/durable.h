// The one durable-write recipe. Everything Nightjar persists as a file is written by
// write_file_durably:
//
//   PATH.tmp (same directory) ← bytes; fdatasync(PATH.tmp); rename(PATH.tmp, PATH);
//   fsync(directory of PATH)
//
// so that a crash at any instant leaves PATH either as it was or complete with the new
// contents, never torn. Append-only files (the state checkpoint's position segment) are
// created by this recipe and then grown by append_durably; the bytes they append only
// count once a file written by write_file_durably records the new length.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "engine/io/env.h"

namespace nj {

// Writes the whole file at `path` by the recipe above.
// On error (returned with the failing step and path): PATH is untouched and the temp file
// is removed (best effort), except when only the final directory fsync failed, in which
// case PATH already holds the complete new contents but they may not survive a power loss.
// REQUIRES: no other writer uses PATH or PATH.tmp at the same time.
Status write_file_durably(Env& env, const std::string& path, std::string_view bytes);

// The same recipe, with the contents produced by `fill` appending to the temp file (for
// files too large to assemble in memory first). An error from `fill` aborts the write.
using FileFiller = std::function<Status(WritableFile& file)>;
Status write_file_durably(Env& env, const std::string& path, const FileFiller& fill);

// Appends `pieces` in order to an open append-only file, then fdatasyncs it. On error the
// file may hold any prefix of the pieces past its previous end: the caller must not
// record the new length anywhere and should not append to this file again (its end is
// unknown); readers ignore bytes past the recorded length.
Status append_durably(WritableFile& file, std::span<const std::string_view> pieces);

// The temp file write_file_durably uses for `path`.
std::string durable_temp_path(const std::string& path);

}  // namespace nj
