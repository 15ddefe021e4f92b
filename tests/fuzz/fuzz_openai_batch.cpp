// Fuzzes the OpenAI Batch API input reader (jobs/openai_batch.h): the input is the file's
// text, one request per line. A file is refused with errors naming it, or accepted with
// requests that each have a unique non-empty custom_id, at least one message and a line.
#include <set>
#include <string>

#include "jobs/openai/openai_batch.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  auto requests = jobs::parse_openai_batch(std::string(fuzz::bytes(data, size)), "batch.jsonl");
  if (!requests.ok()) {
    fuzz::note(requests.status().message());
    fuzz::check(requests.status().message().find("batch.jsonl") != std::string::npos,
                "the error does not name the file: " + requests.status().message());
    return 0;
  }
  fuzz::check(!requests->empty(), "a file accepted without requests");
  std::set<std::string> ids;
  for (const auto& r : *requests) {
    fuzz::check(!r.custom_id.empty() && ids.insert(r.custom_id).second,
                "custom_id '" + r.custom_id + "' accepted empty or twice");
    fuzz::check(!r.messages.empty() && r.line >= 1, "a request accepted without messages or line");
  }
  fuzz::note("accepted");
  return 0;
}
