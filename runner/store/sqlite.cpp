// SQLite connections, statements and transactions with errors as Status.
#include "runner/store/sqlite.h"

#include <sqlite3.h>

#include <cstring>

namespace nj::runner::sql {
namespace {

Status map_error(int rc, std::string message) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return corruption(std::move(message));
    case SQLITE_FULL:
      return resource_exhausted(std::move(message));
    case SQLITE_CANTOPEN:
      return io_error(std::move(message));
    case SQLITE_CONSTRAINT:
      return failed_precondition(std::move(message));
    default:
      return io_error(std::move(message));
  }
}

}  // namespace

// ---- Stmt -----------------------------------------------------------------------------

Stmt::Stmt(Stmt&& o) noexcept : db_(o.db_), s_(o.s_), bind_error_(std::move(o.bind_error_)) {
  o.s_ = nullptr;
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    if (s_) sqlite3_finalize(s_);
    db_ = o.db_;
    s_ = o.s_;
    bind_error_ = std::move(o.bind_error_);
    o.s_ = nullptr;
  }
  return *this;
}

Stmt::~Stmt() {
  if (s_) sqlite3_finalize(s_);
}

Status Stmt::error(int rc, const char* what) const {
  const char* sql = s_ ? sqlite3_sql(s_) : "";
  return db_->error(rc, std::string(what) + " of: " + (sql ? sql : ""));
}

#define NJ_BIND(call)                                                           \
  do {                                                                          \
    int rc_ = (call);                                                           \
    if (rc_ != SQLITE_OK && bind_error_.ok()) bind_error_ = error(rc_, "bind"); \
  } while (0)

Stmt& Stmt::bind(int i, int64_t v) {
  NJ_BIND(sqlite3_bind_int64(s_, i, v));
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  NJ_BIND(sqlite3_bind_double(s_, i, v));
  return *this;
}
Stmt& Stmt::bind(int i, std::string_view text) {
  NJ_BIND(sqlite3_bind_text64(s_, i, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}
Stmt& Stmt::bind_blob(int i, std::span<const uint8_t> bytes) {
  static const uint8_t kEmpty = 0;  // a zero-length blob, not NULL
  NJ_BIND(sqlite3_bind_blob64(s_, i, bytes.empty() ? &kEmpty : bytes.data(), bytes.size(),
                              SQLITE_TRANSIENT));
  return *this;
}
Stmt& Stmt::bind_null(int i) {
  NJ_BIND(sqlite3_bind_null(s_, i));
  return *this;
}
#undef NJ_BIND

Result<bool> Stmt::step() {
  if (!bind_error_.ok()) return bind_error_;
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status s = error(rc, "step");
  sqlite3_reset(s_);
  return s;
}

Status Stmt::run() {
  for (;;) {
    NJ_ASSIGN_OR_RETURN(bool row, step());
    if (!row) break;
  }
  sqlite3_reset(s_);
  return Status();
}

void Stmt::reset() {
  sqlite3_reset(s_);
}

int64_t Stmt::int64(int col) const {
  return sqlite3_column_int64(s_, col);
}
double Stmt::real(int col) const {
  return sqlite3_column_double(s_, col);
}
std::string Stmt::text(int col) const {
  const unsigned char* t = sqlite3_column_text(s_, col);
  if (!t) return {};
  return std::string(reinterpret_cast<const char*>(t),
                     static_cast<size_t>(sqlite3_column_bytes(s_, col)));
}
std::optional<std::string> Stmt::opt_text(int col) const {
  if (is_null(col)) return std::nullopt;
  return text(col);
}
std::optional<int64_t> Stmt::opt_int64(int col) const {
  if (is_null(col)) return std::nullopt;
  return int64(col);
}
std::optional<double> Stmt::opt_real(int col) const {
  if (is_null(col)) return std::nullopt;
  return real(col);
}
std::vector<uint8_t> Stmt::blob(int col) const {
  const void* p = sqlite3_column_blob(s_, col);
  const int n = sqlite3_column_bytes(s_, col);
  if (!p || n <= 0) return {};
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}
bool Stmt::is_null(int col) const {
  return sqlite3_column_type(s_, col) == SQLITE_NULL;
}

// ---- Db -------------------------------------------------------------------------------

namespace {

// The journal mode the connection is in after the PRAGMA (lower case), or an error.
Result<std::string> set_journal_mode(Db& db, const char* pragma) {
  NJ_ASSIGN_OR_RETURN(Stmt s, db.prepare(pragma));
  NJ_ASSIGN_OR_RETURN(bool row, s.step());
  return row ? s.text(0) : std::string("?");
}

}  // namespace

Result<std::unique_ptr<Db>> Db::open(const std::string& path, bool create, int busy_timeout_ms,
                                     Journal journal) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close(raw);
    if (!create && (rc & 0xff) == SQLITE_CANTOPEN)
      return not_found(path + ": no job store here (" + msg + ")");
    return map_error(rc, path + ": cannot open the job store: " + msg);
  }
  std::unique_ptr<Db> db(new Db(path, raw));
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  // Reading the schema reads the file's header, which says whether it is a WAL database (a
  // rollback journal left by a crash is rolled back here too). No pages: a new file.
  bool is_new = true;
  {
    NJ_ASSIGN_OR_RETURN(Stmt pages, db->prepare("PRAGMA page_count"));
    NJ_ASSIGN_OR_RETURN(bool row, pages.step());
    is_new = !row || pages.int64(0) == 0;
  }
  NJ_ASSIGN_OR_RETURN(std::string mode, set_journal_mode(*db, "PRAGMA journal_mode"));
  if (is_new ? journal == Journal::kRollback : mode != "wal") {
    NJ_ASSIGN_OR_RETURN(mode, set_journal_mode(*db, "PRAGMA journal_mode=TRUNCATE"));
    if (mode != "truncate")
      return io_error(path + ": the job store cannot use a rollback journal (journal_mode is '" +
                      mode + "')");
    db->journal_ = Journal::kRollback;
  } else {
    NJ_ASSIGN_OR_RETURN(mode, set_journal_mode(*db, "PRAGMA journal_mode=WAL"));
    if (mode != "wal")
      return io_error(path + ": the job store cannot use write-ahead logging (journal_mode is '" +
                      mode +
                      "'); is it on a network filesystem? (a Slurm task's home, created "
                      "by `submit --shard`, uses a rollback journal)");
  }
  NJ_RETURN_IF_ERROR(db->exec("PRAGMA foreign_keys=ON"));
  NJ_RETURN_IF_ERROR(db->set_sync(Sync::kFull));
  return db;
}

Db::~Db() {
  sqlite3_close_v2(db_);
}

Status Db::error(int rc, const std::string& what) const {
  const char* msg = sqlite3_errmsg(db_);
  if (!msg || std::strcmp(msg, "not an error") == 0) msg = sqlite3_errstr(rc);
  return map_error(rc, path_ + ": " + msg + " (" + what + ")");
}

Status Db::exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    std::string head = sql.substr(0, 80);
    return map_error(rc,
                     path_ + ": " + msg + " (in: " + head + (sql.size() > 80 ? "..." : "") + ")");
  }
  return Status();
}

Result<Stmt> Db::prepare(const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &s, nullptr);
  if (rc != SQLITE_OK) return error(rc, "prepare: " + sql);
  return Stmt(this, s);
}

int64_t Db::changes() const {
  return sqlite3_changes64(db_);
}
int64_t Db::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

Status Db::set_sync(Sync sync) {
  // In rollback mode synchronous=NORMAL could leave a torn database after a power cut.
  if (journal_ == Journal::kRollback) sync = Sync::kFull;
  if (sync_ == sync) return Status();
  NJ_RETURN_IF_ERROR(
      exec(sync == Sync::kFull ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  sync_ = sync;
  return Status();
}

// ---- Transaction ----------------------------------------------------------------------

Result<std::unique_ptr<Transaction>> Transaction::begin(Db& db, Sync sync) {
  NJ_RETURN_IF_ERROR(db.set_sync(sync));
  NJ_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
  return std::unique_ptr<Transaction>(new Transaction(db));
}

Transaction::~Transaction() {
  if (!done_) (void)db_.exec("ROLLBACK");
}

Status Transaction::commit() {
  Status s = db_.exec("COMMIT");
  if (s.ok()) done_ = true;
  return s;
}

}  // namespace nj::runner::sql
