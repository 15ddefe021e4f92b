// `nightjar pack MODEL_DIR [--out DIR] [--codec raw|lossless]`: write the packed trunk
// (engine/weights/pack.h).
#include <cstdio>
#include <memory>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/io/env.h"
#include "engine/model/config.h"
#include "engine/model/layout.h"
#include "engine/runtime/model.h"
#include "engine/model/tensor_index.h"
#include "engine/weights/pack.h"
#include "engine/util/units.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"

namespace nj::runner {

void add_pack_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::string model, out, output = "text", codec = "lossless";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "pack",
      "Write a packed trunk: each layer's non-expert tensors as one aligned run (experts stay in "
      "the shards), by default compressed losslessly. The engine then uses it automatically");
  sub->add_option("model", a->model, "Model directory")->required();
  sub->add_option("--out", a->out,
                  "Where to write it (default: the model directory; elsewhere, pass --pack DIR "
                  "to the commands that run the model)");
  sub->add_option("--codec", a->codec,
                  "lossless (default: BF16 weights stored in ~2/3 of their bytes, decoded while "
                  "reading) or raw")
      ->check(CLI::IsMember({"raw", "lossless"}));
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    const std::string out = a->out.empty() ? a->model : a->out;
    auto headers =
        open_model_headers(a->model, /*use_pack=*/false, nullptr);  // pack from the shards
    if (!headers.ok()) return report_failure(headers.status());
    PackOptions options;
    options.codec = *parse_pack_codec(a->codec);  // checked by the option
    auto stats = write_trunk_pack(*Env::posix(), *headers->index, *headers->layout, out, options);
    if (!stats.ok()) return report_failure(stats.status());
    const double ratio = stats->raw_bytes ? static_cast<double>(stats->stored_bytes) /
                                                static_cast<double>(stats->raw_bytes)
                                          : 0.0;
    if (a->output == "json") {
      print_json({{"pack", out + "/" + kPackFile},
                  {"manifest", out + "/" + kPackManifest},
                  {"codec", pack_codec_name(stats->codec)},
                  {"units", stats->units},
                  {"pack_bytes", stats->pack_bytes},
                  {"raw_bytes", stats->raw_bytes},
                  {"stored_bytes", stats->stored_bytes},
                  {"blocks", stats->blocks},
                  {"raw_blocks", stats->raw_blocks},
                  {"seconds", stats->seconds}});
    } else {
      std::printf("packed %llu trunk units (%s raw) into %s/%s: %s %s, %.4f of raw, in %.1f s\n",
                  static_cast<unsigned long long>(stats->units),
                  format_bytes(stats->raw_bytes).c_str(), out.c_str(), kPackFile,
                  pack_codec_name(stats->codec), format_bytes(stats->stored_bytes).c_str(), ratio,
                  stats->seconds);
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
