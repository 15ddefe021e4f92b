// Spec-against-model checks: model directory, vocabulary range, text prompts.
#include "jobs/spec_model.h"

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

Status check_spec_against_config(JobSpec& spec, const ModelConfig& config) {
  std::vector<std::string> errors;
  for (size_t i = 0; i < spec.items.size(); ++i) {
    ItemSpec& item = spec.items[i];
    const std::string path = "items[" + std::to_string(i) + "]";
    if (item.prompt_text) {
      // The tokenizer (engine/tokenizer) is not part of this build yet.
      errors.push_back(item.prompt_where + ": " + path + ".prompt: text prompts need the model's tokenizer, " +
                       "which this build of nightjar cannot load yet; give the prompt as prompt_ids");
      continue;
    }
    for (size_t k = 0; k < item.prompt_ids.size(); ++k) {
      if (item.prompt_ids[k] >= config.vocab) {
        errors.push_back(item.prompt_where + ": " + path + ".prompt_ids[" + std::to_string(k) + "]: token id " +
                         std::to_string(item.prompt_ids[k]) + " is outside the model's vocabulary (size " +
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
  return check_spec_against_config(spec, *config);
}

}  // namespace nj::jobs
