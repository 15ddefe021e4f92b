// Spec-against-model checks: model directory, text prompts, vocabulary range.
#include "jobs/spec_model.h"

#include <optional>
#include <string>
#include <vector>

namespace nj::jobs {
namespace {

Status join(const std::vector<std::string>& lines) {
  if (lines.empty()) return Status();
  std::string text;
  for (size_t i = 0; i < lines.size() && i < 20; ++i) text += (i ? "\n" : "") + lines[i];
  if (lines.size() > 20) text += "\n... and " + std::to_string(lines.size() - 20) + " more errors";
  return invalid_argument(text);
}

}  // namespace

Status check_spec_against_model(JobSpec& spec, const ModelConfig& config,
                                const Tokenizer* tokenizer) {
  std::vector<std::string> errors;
  for (size_t i = 0; i < spec.items.size(); ++i) {
    ItemSpec& item = spec.items[i];
    const std::string path = "items[" + std::to_string(i) + "]";
    if (item.prompt_text) {
      if (!tokenizer) {
        errors.push_back(item.prompt_where + ": " + path +
                         ".prompt: text prompts need the model's tokenizer, and " + spec.model_dir +
                         " has none (no " + Tokenizer::kRanksFile + "); give prompt_ids instead");
        continue;
      }
      item.prompt_ids = tokenizer->encode(*item.prompt_text);
      if (item.prompt_ids.empty()) {
        errors.push_back(item.prompt_where + ": " + path +
                         ".prompt: the text encodes to no tokens");
        continue;
      }
    }
    for (size_t k = 0; k < item.prompt_ids.size(); ++k) {
      if (item.prompt_ids[k] >= config.vocab) {
        errors.push_back(item.prompt_where + ": " + path + ".prompt" +
                         (item.prompt_text ? "" : "_ids[" + std::to_string(k) + "]") +
                         ": token id " + std::to_string(item.prompt_ids[k]) +
                         " is outside the model's vocabulary (size " +
                         std::to_string(config.vocab) + ")");
        break;
      }
    }
  }
  return join(errors);
}

Status bind_spec_to_model(JobSpec& spec) {
  auto config = load_model_config(spec.model_dir);
  if (!config.ok())
    return invalid_argument(spec.model_where + ": model: " + config.status().message());
  bool any_text = false;
  for (const auto& item : spec.items) any_text = any_text || item.prompt_text.has_value();
  std::optional<Tokenizer> tokenizer;
  if (any_text && Tokenizer::exists_in(spec.model_dir)) {
    auto loaded = Tokenizer::load(spec.model_dir);
    if (!loaded.ok())
      return invalid_argument(
          spec.model_where + ": model: its tokenizer cannot be read: " + loaded.status().message());
    tokenizer.emplace(std::move(*loaded));
  }
  return check_spec_against_model(spec, *config, tokenizer ? &*tokenizer : nullptr);
}

}  // namespace nj::jobs
