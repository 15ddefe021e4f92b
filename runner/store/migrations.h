// The store's migrations, compiled in from schemas/NNN_*.sql (see runner/CMakeLists.txt),
// in ascending order of their number.
#pragma once

#include <span>

namespace nj::runner {

struct Migration {
  int version;       // NNN of the file name
  const char* name;  // "001_initial.sql"
  const char* sql;   // the file's text
};

std::span<const Migration> store_migrations();

}  // namespace nj::runner
