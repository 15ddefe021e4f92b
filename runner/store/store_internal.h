// Helpers shared by the store's .cpp files: column lists, row readers, event inserts.
// Private to runner/store/.
#pragma once

#include <optional>
#include <string>

#include "runner/store/job_store.h"
#include "runner/store/sqlite.h"

namespace nj::runner::store_internal {

// SELECT lists (table aliases j = jobs, i = items) and their readers; `col` is the index of
// the list's first column in the statement.
extern const char* const kJobColumns;  // kJobColumnCount columns
inline constexpr int kJobColumnCount = 13;
extern const char* const kItemColumns;  // 31 columns
JobRow read_job(const sql::Stmt& s, int col);
ItemRow read_item(const sql::Stmt& s, int col);

Status insert_event(sql::Db& db, double at, std::optional<int64_t> job_id,
                    std::optional<int64_t> item_id, const std::string& kind,
                    const std::string& detail_json);

Result<std::vector<int32_t>> read_tokens(sql::Db& db, int64_t item_id);
Result<std::vector<CheckpointRow>> read_checkpoints(sql::Db& db, int64_t item_id);

}  // namespace nj::runner::store_internal
