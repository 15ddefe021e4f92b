// Fuzzes the job spec reader (jobs/spec_parser.h, both kinds): the input is the YAML of a
// spec in a scratch directory that holds a few documents (docs/*.txt, docs.jsonl), so that
// classify inputs resolve. A spec is refused with every error prefixed by the spec's name,
// or accepted with at least one item, every id unique.
#include <set>
#include <string>

#include "jobs/spec/spec_parser.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

const std::string& spec_dir() {
  static const std::string dir = [] {
    nj::fuzz::write_scratch("spec/docs/a.txt", "The invoice was charged twice.\n");
    nj::fuzz::write_scratch("spec/docs/b.txt", "The app crashes on start.\n");
    nj::fuzz::write_scratch(
        "spec/docs.jsonl",
        "{\"id\": \"d1\", \"text\": \"first\"}\n{\"id\": \"d2\", \"text\": \"second\"}\n");
    return nj::fuzz::scratch_dir() + "/spec";
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  const std::string& dir = spec_dir();
  const std::string name = dir + "/job.yaml";
  auto spec = jobs::parse_job_spec(std::string(fuzz::bytes(data, size)), name, dir);
  if (!spec.ok()) {
    fuzz::note(spec.status().message());
    fuzz::check(spec.status().message().find(name) != std::string::npos,
                "the error does not name the spec: " + spec.status().message());
    return 0;
  }
  fuzz::check(!spec->items.empty(), "a spec accepted without items");
  std::set<std::string> ids;
  for (const auto& item : spec->items)
    fuzz::check(ids.insert(item.id).second, "a spec accepted with the id '" + item.id + "' twice");
  fuzz::note("accepted");
  return 0;
}
