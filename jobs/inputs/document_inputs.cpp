// Document inputs: glob(3) over files and JSON Lines, with errors naming file and line.
#include "jobs/inputs/document_inputs.h"

#include <glob.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/io/file.h"

namespace nj::jobs {
namespace {

// A JSON Lines input holds many documents.
constexpr size_t kMaxJsonlBytes = 1u << 30;

std::string resolve(const std::string& path, const std::string& base_dir) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  return p.lexically_normal().string();
}

}  // namespace

std::string document_too_large(const std::string& what, size_t bytes) {
  return what + " is " + std::to_string(bytes) + " bytes, more than the " +
         std::to_string(kMaxDocumentBytes >> 20) + " MiB a document may have";
}

DocumentsRead read_glob_documents(const std::string& pattern, const std::string& base_dir) {
  DocumentsRead out;
  const std::string full = resolve(pattern, base_dir);
  glob_t g{};
  const int rc = ::glob(full.c_str(), GLOB_MARK, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOSPACE || rc == GLOB_ABORTED) {
    out.errors.push_back("'" + pattern + "': cannot list the files it names (" + full + ")");
    return out;
  }
  const std::filesystem::path base = std::filesystem::path(base_dir).lexically_normal();
  for (const std::string& path : paths) {
    if (!path.empty() && path.back() == '/') continue;  // a directory (GLOB_MARK)
    std::string id = std::filesystem::path(path).lexically_relative(base).string();
    if (id.empty()) id = path;
    std::error_code ec;
    if (const auto size = std::filesystem::file_size(path, ec); !ec && size > kMaxDocumentBytes) {
      out.errors.push_back(document_too_large(id, static_cast<size_t>(size)));
      continue;
    }
    auto text = read_small_file(path, kMaxDocumentBytes);
    if (!text.ok()) {
      out.errors.push_back(id + ": cannot read the document: " + text.status().message());
      continue;
    }
    if (text->empty()) {
      out.errors.push_back(id + ": the document is empty");
      continue;
    }
    out.documents.push_back(Document{id, std::move(*text), id});
  }
  if (out.documents.empty() && out.errors.empty())
    out.errors.push_back("'" + pattern + "' matches no files (looked for " + full + ")");
  return out;
}

DocumentsRead read_jsonl_documents(const std::string& path, const std::string& base_dir,
                                   const std::string& id_field, const std::string& text_field) {
  DocumentsRead out;
  const std::string full = resolve(path, base_dir);
  auto text = read_small_file(full, kMaxJsonlBytes);
  if (!text.ok()) {
    out.errors.push_back(path + ": cannot read: " + text.status().message());
    return out;
  }
  size_t start = 0;
  for (int line = 1; start < text->size(); ++line) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const std::string_view row(text->data() + start, end - start);
    start = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(line);
    auto j = nlohmann::json::parse(row, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      out.errors.push_back(where + ": not a JSON object");
      continue;
    }
    Document d;
    d.where = where;
    auto id = j.find(id_field);
    if (id == j.end())
      out.errors.push_back(where + ": missing field '" + id_field + "' (the id)");
    else if (id->is_string() && !id->get<std::string>().empty())
      d.id = id->get<std::string>();
    else if (id->is_number_integer())
      d.id = id->dump();
    else
      out.errors.push_back(where + ": field '" + id_field +
                           "' must be non-empty text or a whole number");
    auto doc = j.find(text_field);
    if (doc == j.end())
      out.errors.push_back(where + ": missing field '" + text_field + "' (the document)");
    else if (!doc->is_string() || doc->get<std::string>().empty())
      out.errors.push_back(where + ": field '" + text_field + "' must be non-empty text");
    else if (doc->get_ref<const std::string&>().size() > kMaxDocumentBytes)
      out.errors.push_back(document_too_large(where + ": field '" + text_field + "'",
                                              doc->get_ref<const std::string&>().size()));
    else
      d.text = doc->get<std::string>();
    if (!d.id.empty() && !d.text.empty()) out.documents.push_back(std::move(d));
  }
  if (out.documents.empty() && out.errors.empty())
    out.errors.push_back(path + ": holds no documents");
  return out;
}

}  // namespace nj::jobs
