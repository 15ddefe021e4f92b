// Fuzzes config.json (engine/model/config.h). A config is refused with an error naming the
// file, or accepted with the sizes the engine divides and allocates by all positive.
#include <string>

#include "engine/model/config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  auto config = parse_model_config(std::string(fuzz::bytes(data, size)), "config.json");
  if (!config.ok()) {
    fuzz::note(config.status().message());
    fuzz::check(config.status().message().find("config.json") != std::string::npos,
                "the error does not name the file: " + config.status().message());
    return 0;
  }
  const ModelConfig& c = *config;
  fuzz::check(c.hidden > 0 && c.layers > 0 && c.vocab > 0 && c.heads > 0,
              "config accepted with a non-positive size");
  // The derived sizes must not overflow for any accepted config.
  volatile int64_t sink = 0;  // the products are checked by UBSan (signed overflow)
  sink = sink + c.kda_width() + c.mla_q_width() + c.shared_inter() + c.num_kda_layers() +
         c.num_mla_layers();
  fuzz::note("accepted");
  return 0;
}
