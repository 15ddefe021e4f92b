// Where a classify job's documents come from: files matched by a glob, or the lines of a
// JSON Lines file. Both resolve relative paths against the spec's directory and collect
// every problem (not just the first) so that one submit reports them all.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace nj::jobs {

// The most text one document or prompt may hold, the same for every input kind: a glob-matched
// file, a JSON Lines text field, an inline `document:` or `prompt:`, and the messages of an
// OpenAI batch request. A classification prompt or a generation's start, not a corpus: at
// ~4 bytes per token it is ~4M tokens, beyond any model's context.
inline constexpr size_t kMaxDocumentBytes = 16u << 20;

// "<what> is N bytes, more than the 16 MiB a document may have", for every input kind alike.
std::string document_too_large(const std::string& what, size_t bytes);

struct Document {
  std::string id;     // the custom_id: the file's path relative to the spec's directory, or
                      // the JSONL line's id field
  std::string text;   // the document
  std::string where;  // "tickets/a.txt" or "docs.jsonl:12" (for messages)
};

struct DocumentsRead {
  std::vector<Document> documents;  // in order: sorted paths, or line order
  std::vector<std::string> errors;  // each naming the file (and line): empty on success
};

// Every regular file matching `pattern` (glob(3) syntax; relative to `base_dir` unless
// absolute), sorted by path. No match, an unreadable or an empty file are errors.
DocumentsRead read_glob_documents(const std::string& pattern, const std::string& base_dir);

// One document per non-blank line of the JSON Lines file `path` (relative to `base_dir`
// unless absolute): each line a JSON object whose `id_field` (text or a whole number) and
// `text_field` (text) are the id and the document. Errors name the file and line.
DocumentsRead read_jsonl_documents(const std::string& path, const std::string& base_dir,
                                   const std::string& id_field, const std::string& text_field);

}  // namespace nj::jobs
