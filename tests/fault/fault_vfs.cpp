// The fault-injecting SQLite VFS (fault_vfs.h): a shim over the default VFS whose files
// forward every method, except that xWrite and xSync count and may fail.
#include "tests/fault/fault_vfs.h"

#include <sqlite3.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace nj::testing {
namespace {

struct State {
  FaultPlan plan;
  sqlite3_vfs* base = nullptr;
  sqlite3_vfs vfs{};
  sqlite3_io_methods methods{};
  uint64_t ops = 0;  // operations counted so far, this process's included
  bool fired = false;
};
State g;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fault_vfs: %s\n", what.c_str());
  std::abort();
}

// What the shim adds to the base VFS's file, which follows it in the same allocation.
struct File {
  sqlite3_file base;  // methods = &g.methods
  sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};
File* file(sqlite3_file* f) {
  return reinterpret_cast<File*>(f);
}

// True when this operation is the one to fail.
bool fault_now() {
  ++g.ops;
  if (g.plan.fail_at == 0 || g.ops != g.plan.fail_at) return false;
  g.fired = true;
  return true;
}

int x_close(sqlite3_file* f) {
  sqlite3_file* r = file(f)->real();
  return r->pMethods ? r->pMethods->xClose(r) : SQLITE_OK;
}
int x_read(sqlite3_file* f, void* p, int n, sqlite3_int64 off) {
  return file(f)->real()->pMethods->xRead(file(f)->real(), p, n, off);
}
int x_write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  if (fault_now()) return g.plan.code == SQLITE_IOERR ? SQLITE_IOERR_WRITE : g.plan.code;
  return file(f)->real()->pMethods->xWrite(file(f)->real(), p, n, off);
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  return file(f)->real()->pMethods->xTruncate(file(f)->real(), size);
}
int x_sync(sqlite3_file* f, int flags) {
  if (fault_now()) return g.plan.code == SQLITE_IOERR ? SQLITE_IOERR_FSYNC : g.plan.code;
  return file(f)->real()->pMethods->xSync(file(f)->real(), flags);
}
int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return file(f)->real()->pMethods->xFileSize(file(f)->real(), size);
}
int x_lock(sqlite3_file* f, int level) {
  return file(f)->real()->pMethods->xLock(file(f)->real(), level);
}
int x_unlock(sqlite3_file* f, int level) {
  return file(f)->real()->pMethods->xUnlock(file(f)->real(), level);
}
int x_check_reserved_lock(sqlite3_file* f, int* out) {
  return file(f)->real()->pMethods->xCheckReservedLock(file(f)->real(), out);
}
int x_file_control(sqlite3_file* f, int op, void* arg) {
  return file(f)->real()->pMethods->xFileControl(file(f)->real(), op, arg);
}
int x_sector_size(sqlite3_file* f) {
  return file(f)->real()->pMethods->xSectorSize(file(f)->real());
}
int x_device_characteristics(sqlite3_file* f) {
  return file(f)->real()->pMethods->xDeviceCharacteristics(file(f)->real());
}
int x_shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** p) {
  return file(f)->real()->pMethods->xShmMap(file(f)->real(), page, size, extend, p);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return file(f)->real()->pMethods->xShmLock(file(f)->real(), offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) {
  file(f)->real()->pMethods->xShmBarrier(file(f)->real());
}
int x_shm_unmap(sqlite3_file* f, int del) {
  return file(f)->real()->pMethods->xShmUnmap(file(f)->real(), del);
}
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** p) {
  return file(f)->real()->pMethods->xFetch(file(f)->real(), off, n, p);
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return file(f)->real()->pMethods->xUnfetch(file(f)->real(), off, p);
}

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  File* shim = file(f);
  std::memset(shim, 0, sizeof(File));
  const int rc = g.base->xOpen(g.base, name, shim->real(), flags, out_flags);
  // SQLite calls xClose only when pMethods is set, also after a failed open.
  shim->base.pMethods = shim->real()->pMethods ? &g.methods : nullptr;
  return rc;
}

void save_counter() {
  std::ofstream out(g.plan.counter_file, std::ios::trunc);
  out << g.ops << ' ' << (g.fired ? 1 : 0) << '\n';
}

}  // namespace

bool install_fault_vfs_from_env() {
  const char* counter = std::getenv("NJ_FAULT_COUNTER");
  if (!counter || !*counter) return false;
  g.plan.counter_file = counter;
  if (const char* at = std::getenv("NJ_FAULT_AT")) g.plan.fail_at = std::strtoull(at, nullptr, 10);
  const std::string code = std::getenv("NJ_FAULT_CODE") ? std::getenv("NJ_FAULT_CODE") : "full";
  if (code == "full") {
    g.plan.code = SQLITE_FULL;
  } else if (code == "ioerr") {
    g.plan.code = SQLITE_IOERR;
  } else {
    die("NJ_FAULT_CODE must be full or ioerr, not '" + code + "'");
  }
  {
    std::ifstream in(g.plan.counter_file);
    int fired = 0;
    if (in && !(in >> g.ops >> fired)) die(g.plan.counter_file + ": not '<ops> <fired>'");
    g.fired = fired != 0;
  }
  // A fault that fired in an earlier process of the night is not injected again.
  if (g.fired) g.plan.fail_at = 0;

  g.base = sqlite3_vfs_find(nullptr);
  if (!g.base) die("no default VFS");
  g.vfs = *g.base;
  g.vfs.zName = "nightjar-fault";
  g.vfs.szOsFile = static_cast<int>(sizeof(File)) + g.base->szOsFile;
  g.vfs.xOpen = x_open;
  g.vfs.pNext = nullptr;
  g.methods = sqlite3_io_methods{3,
                                 x_close,
                                 x_read,
                                 x_write,
                                 x_truncate,
                                 x_sync,
                                 x_file_size,
                                 x_lock,
                                 x_unlock,
                                 x_check_reserved_lock,
                                 x_file_control,
                                 x_sector_size,
                                 x_device_characteristics,
                                 x_shm_map,
                                 x_shm_lock,
                                 x_shm_barrier,
                                 x_shm_unmap,
                                 x_fetch,
                                 x_unfetch};
  if (sqlite3_vfs_register(&g.vfs, 1) != SQLITE_OK) die("cannot register the VFS");
  std::atexit(save_counter);
  return true;
}

}  // namespace nj::testing
