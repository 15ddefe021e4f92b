// A thin RAII layer over the SQLite C API: connections, prepared statements and
// transactions, with every failure turned into a Status naming the database and the
// statement. Part of the store (runner/store/), the only code that talks to SQLite; this
// header keeps <sqlite3.h> out of its includers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace nj::runner::sql {

class Db;

// A prepared statement. Bind indexes are 1-based (SQLite's convention); column indexes
// 0-based. Movable, not copyable; finalized on destruction. Not thread-safe.
class Stmt {
 public:
  Stmt() = default;
  Stmt(Stmt&& o) noexcept;
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view text);
  Stmt& bind(int i, const char* text) { return bind(i, std::string_view(text)); }
  Stmt& bind(int i, const std::string& text) { return bind(i, std::string_view(text)); }
  Stmt& bind_blob(int i, std::span<const uint8_t> bytes);
  Stmt& bind_null(int i);
  template <typename T>
  Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  // Advances: true with a row available, false when done. Errors name the statement.
  Result<bool> step();
  // Steps to completion, expecting no rows.
  Status run();
  // Resets for re-execution (bindings are kept).
  void reset();

  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;  // "" for NULL
  std::optional<std::string> opt_text(int col) const;
  std::optional<int64_t> opt_int64(int col) const;
  std::optional<double> opt_real(int col) const;
  std::vector<uint8_t> blob(int col) const;
  bool is_null(int col) const;

 private:
  friend class Db;
  Stmt(Db* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  Status error(int rc, const char* what) const;
  Db* db_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
  Status bind_error_;  // the first bind failure, reported by step()
};

// How hard a transaction's commit pushes to the disk (PRAGMA synchronous, set per
// transaction on the connection).
enum class Sync {
  kFull,    // fsync on every commit: state transitions, checkpoint rows, results
  kNormal,  // WAL appended, fsync at the next kFull commit or WAL checkpoint: token appends,
            // which a power cut may lose but a process crash never does (WAL only: a
            // rollback-journal database commits every transaction as kFull)
};

// How a database keeps its journal. Chosen when the file is created; the file then keeps it
// (SQLite records WAL in the file's header, and a file without that mark is opened in
// rollback mode), whatever a later open asks for.
enum class Journal {
  // Write-ahead log: readers never block the writer and a commit appends. Its index lives in
  // shared memory (the -shm file, mmap), which only processes of one host see coherently.
  kWal,
  // Rollback journal, journal_mode=TRUNCATE: every connection coordinates through POSIX
  // byte-range locks on the database file alone, which a shared filesystem (NFS, Lustre,
  // ...) provides between hosts. TRUNCATE rather than DELETE: with synchronous=FULL a
  // truncated journal is fsynced (a deleted one is not, unless its directory is), and a
  // truncate costs a shared filesystem one attribute change instead of a directory update.
  kRollback,
};

// One connection. Not thread-safe: one thread at a time (each thread opens its own).
class Db {
 public:
  // Opens (creating when `create` is true) the database at `path`, with foreign keys on and
  // `busy_timeout_ms` of waiting for other connections' locks. A new (or empty) file gets
  // `journal`; an existing one keeps the journal it has (see Journal).
  // NotFound when it does not exist and !create; IOError / Corruption otherwise.
  static Result<std::unique_ptr<Db>> open(const std::string& path, bool create, int busy_timeout_ms,
                                          Journal journal = Journal::kWal);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements that return no rows.
  Status exec(const std::string& sql);
  Result<Stmt> prepare(const std::string& sql);
  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t changes() const;
  int64_t last_insert_rowid() const;
  const std::string& path() const { return path_; }
  Journal journal() const { return journal_; }

  // Sets PRAGMA synchronous for following commits.
  Status set_sync(Sync sync);

  // "<path>: <sqlite message> (<what>)" with a code mapped from the SQLite result code:
  // Corruption for a damaged file, ResourceExhausted for a full disk, IOError otherwise.
  Status error(int rc, const std::string& what) const;

 private:
  Db(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  std::string path_;
  sqlite3* db_ = nullptr;
  std::optional<Sync> sync_;
  Journal journal_ = Journal::kWal;
};

// A write transaction: BEGIN IMMEDIATE (takes the write lock up front, so two processes
// claiming work serialize instead of failing at commit), rolled back unless committed.
class Transaction {
 public:
  // Begins. The busy timeout applies while another connection holds the write lock.
  static Result<std::unique_ptr<Transaction>> begin(Db& db, Sync sync);
  ~Transaction();
  Status commit();

 private:
  explicit Transaction(Db& db) : db_(db) {}
  Db& db_;
  bool done_ = false;
};

}  // namespace nj::runner::sql
