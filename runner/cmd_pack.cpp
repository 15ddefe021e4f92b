// `nightjar pack MODEL_DIR [--out DIR]`: write the packed trunk (engine/model/pack.h).
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "engine/io/env.h"
#include "engine/model/tensor_index.h"
#include "engine/model/config.h"
#include "engine/model/layout.h"
#include "engine/model/model.h"
#include "engine/model/pack.h"
#include "engine/util/units.h"
#include "runner/commands.h"
#include "runner/exit_codes.h"
#include "runner/output.h"

namespace nj::runner {

void add_pack_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::string model, out, output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "pack", "Write a packed trunk: each layer's non-expert tensors as one aligned run (experts stay in the "
              "shards). The engine then uses it automatically");
  sub->add_option("model", a->model, "Model directory")->required();
  sub->add_option("--out", a->out, "Where to write it (default: the model directory; elsewhere, pass --pack DIR "
                                   "to the commands that run the model)");
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    const std::string out = a->out.empty() ? a->model : a->out;
    auto headers = open_model_headers(a->model, /*use_pack=*/false, nullptr);  // pack from the shards
    if (!headers.ok()) return report_failure(headers.status());
    auto stats = write_trunk_pack(*Env::posix(), *headers->index, *headers->layout, out);
    if (!stats.ok()) return report_failure(stats.status());
    if (a->output == "json") {
      print_json({{"pack", out + "/" + kPackFile}, {"manifest", out + "/" + kPackManifest},
                  {"units", stats->units}, {"pack_bytes", stats->pack_bytes}, {"seconds", stats->seconds}});
    } else {
      std::printf("packed %llu trunk units (%s) into %s/%s in %.1f s\n",
                  static_cast<unsigned long long>(stats->units), format_bytes(stats->pack_bytes).c_str(), out.c_str(),
                  kPackFile, stats->seconds);
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
