// The migrations table, generated from schemas/*.sql at configure time.
#include "runner/store/migrations.h"

namespace nj::runner {
namespace {

const Migration kMigrations[] = {
#include "runner/store/migrations.inc"
};

}  // namespace

std::span<const Migration> store_migrations() {
  return kMigrations;
}

}  // namespace nj::runner
