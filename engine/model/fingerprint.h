// The model's fingerprint: a hash of the parsed config and of every tensor's name, dtype and
// shape. A state checkpoint and a packed trunk record it, so that neither is ever used with
// another model.
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/config.h"
#include "engine/model/tensor_index.h"

namespace nj {

// The config fields that define the computation, as canonical text (hashed by fingerprint).
std::string canonical_config_text(const ModelConfig& c);

// The hash of the canonical config text and of the index's layout (Model::fingerprint()).
uint64_t model_fingerprint(const ModelConfig& c, const TensorIndex& index);

}  // namespace nj
