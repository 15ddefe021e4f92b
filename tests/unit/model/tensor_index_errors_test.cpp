// Bad checkpoints and configs fail with a clear error naming the file and the tensor or
// key, never a crash. Each case damages a copy of a golden fixture in one way.
#include <catch2/catch.hpp>

#include "engine/model/tensor_index.h"
#include "engine/model/config.h"
#include "engine/runtime/model.h"
#include "tests/unit/model/test_models.h"

namespace nj {
namespace {

using testing::TempDir;

const std::string kNorm = "language_model.model.layers.2.input_layernorm.weight";
const std::string kQProj = "language_model.model.layers.1.self_attn.q_proj.weight";

// Opens the model and returns the error message (failing the test if it opened).
std::string open_error(const std::string& dir) {
  auto m = Model::open(dir);
  REQUIRE_FALSE(m.ok());
  return m.status().message();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_CASE("a truncated safetensors file is refused, naming the file", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  const std::string path = d.file("model.safetensors");
  const std::string bytes = testing::read_all(path);
  for (size_t keep : {size_t{0}, size_t{5}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    INFO("kept " << keep << " bytes");
    testing::write_all(path, bytes.substr(0, keep));
    const std::string e = open_error(d.path());
    CHECK(contains(e, path));
    if (keep >= 8 + 100000) CHECK(contains(e, "ends past the file"));
  }
}

TEST_CASE("a header whose offsets run past the end names the tensor", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  testing::edit_header(d.file("model.safetensors"), [](nlohmann::json& h) {
    auto& off = h[kNorm]["data_offsets"];
    off[0] = 900000000;
    off[1] = 900000000 + 512;
  });
  const std::string e = open_error(d.path());
  CHECK(contains(e, d.file("model.safetensors")));
  CHECK(contains(e, kNorm));
  CHECK(contains(e, "ends past the file"));
}

TEST_CASE("offsets that disagree with shape x dtype are refused", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  testing::edit_header(d.file("model.safetensors"), [](nlohmann::json& h) { h[kNorm]["shape"] = {64}; });
  const std::string e = open_error(d.path());
  CHECK(contains(e, kNorm));
  CHECK(contains(e, "needs 256 bytes but data_offsets span 512"));
}

TEST_CASE("a tensor of the wrong shape names the tensor and both shapes", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  testing::edit_header(d.file("model.safetensors"), [](nlohmann::json& h) { h[kQProj]["shape"] = {128, 64}; });
  const std::string e = open_error(d.path());
  CHECK(contains(e, kQProj));
  CHECK(contains(e, "has shape [128, 64], expected [64, 128]"));
  CHECK(contains(e, d.file("model.safetensors")));
}

TEST_CASE("a tensor of the wrong dtype names the tensor and the dtype", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  testing::edit_header(d.file("model.safetensors"), [](nlohmann::json& h) { h[kNorm]["dtype"] = "I32"; });
  const std::string e = open_error(d.path());
  CHECK(contains(e, kNorm));
  CHECK(contains(e, "dtype I32"));
}

TEST_CASE("an unknown dtype is refused by the index", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  testing::edit_header(d.file("model.safetensors"), [](nlohmann::json& h) { h[kNorm]["dtype"] = "Q4_K"; });
  const std::string e = open_error(d.path());
  CHECK(contains(e, kNorm));
  CHECK(contains(e, "unknown dtype 'Q4_K'"));
}

TEST_CASE("a missing tensor is named", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  testing::edit_header(d.file("model.safetensors"), [](nlohmann::json& h) { h.erase(kQProj); });
  const std::string e = open_error(d.path());
  CHECK(contains(e, "tensor '" + kQProj + "' is missing"));
}

TEST_CASE("a header that is not JSON names the file and the byte", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  std::string bytes = testing::read_all(d.file("model.safetensors"));
  bytes[40] = '}';
  testing::write_all(d.file("model.safetensors"), bytes);
  const std::string e = open_error(d.path());
  CHECK(contains(e, d.file("model.safetensors")));
  CHECK(contains(e, "JSON at byte"));
}

TEST_CASE("a sharded index naming a missing shard or tensor is refused", "[engine][checkpoint][errors]") {
  TempDir d;
  testing::copy_golden("tiny-sharded", d.path());
  SECTION("missing shard file") {
    std::filesystem::remove(d.file("model-00002-of-00003.safetensors"));
    const std::string e = open_error(d.path());
    CHECK(contains(e, "model-00002-of-00003.safetensors"));
    CHECK(contains(e, "does not exist"));
  }
  SECTION("tensor mapped to a shard that lacks it") {
    auto index = nlohmann::json::parse(testing::read_all(d.file("model.safetensors.index.json")));
    index["weight_map"]["language_model.model.layers.0.extra.weight"] = "model-00001-of-00003.safetensors";
    testing::write_all(d.file("model.safetensors.index.json"), index.dump());
    const std::string e = open_error(d.path());
    CHECK(contains(e, "language_model.model.layers.0.extra.weight"));
    CHECK(contains(e, "not in its header"));
  }
}

TEST_CASE("a directory without a checkpoint or config says so", "[engine][checkpoint][errors]") {
  TempDir d;
  CHECK(contains(open_error(d.path()), "no config.json"));
  testing::copy_golden("tiny-mxfp4", d.path());
  std::filesystem::remove(d.file("model.safetensors"));
  CHECK(contains(open_error(d.path()), "no model.safetensors"));
}

// --- config.json ---

std::string config_error(const std::function<void(nlohmann::json&)>& edit, const std::string& fixture = "tiny-mxfp4") {
  auto j = nlohmann::json::parse(testing::read_all(testing::golden_dir(fixture) + "/config.json"));
  edit(j);
  auto c = parse_model_config(j.dump(), "config.json");
  REQUIRE_FALSE(c.ok());
  return c.status().message();
}

TEST_CASE("config.json errors name the key and the value", "[engine][config][errors]") {
  CHECK(contains(config_error([](auto& j) { j["text_config"].erase("hidden_size"); }),
                 "missing required key 'text_config.hidden_size'"));
  CHECK(contains(config_error([](auto& j) { j["text_config"]["linear_attn_config"].erase("head_dim"); }),
                 "'text_config.linear_attn_config.head_dim'"));
  CHECK(contains(config_error([](auto& j) { j["text_config"]["num_experts_per_token"] = 9; }),
                 "top_k exceeds num_experts (8)"));
  CHECK(contains(config_error([](auto& j) { j["text_config"]["linear_attn_config"]["full_attn_layers"] = {4, 14}; }),
                 "= 14: layer index out of range"));
  CHECK(contains(config_error([](auto& j) { j["text_config"]["hidden_act"] = "gelu"; }), "\"gelu\": unsupported activation"));
  CHECK(contains(config_error([](auto& j) { j["text_config"]["routed_expert_hidden_size"] = 48; }),
                 "multiple of the group size 32"));
  CHECK(contains(config_error([](auto& j) { j["text_config"]["hidden_size"] = "128"; }), "expected an integer"));
  CHECK(contains(config_error([](auto& j) { j["text_config"]["linear_attn_config"]["kda_layers"] = {1, 2}; }),
                 "in neither full_attn_layers nor kda_layers"));
}

// Found by fuzz_config (issue 16): each size was bounded, but the widths the engine derives
// from two of them (ModelConfig::kda_width() and the others) overflowed int.
TEST_CASE("config.json sizes whose derived widths overflow int are refused",
          "[engine][config][errors]") {
  CHECK(contains(config_error([](auto& j) {
                   j["text_config"]["linear_attn_config"]["num_heads"] = 100000;
                   j["text_config"]["linear_attn_config"]["head_dim"] = 100000;
                 }),
                 "num_heads x head_dim = 10000000000 is too large"));
  CHECK(contains(config_error([](auto& j) {
                   j["text_config"]["qk_nope_head_dim"] = 1 << 30;
                   j["text_config"]["qk_rope_head_dim"] = 1 << 30;
                 }),
                 "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)"));
  CHECK(contains(config_error([](auto& j) {
                   j["text_config"]["num_shared_experts"] = 1 << 20;
                   j["text_config"]["moe_intermediate_size"] = 1 << 20;
                 }),
                 "num_shared_experts x moe_intermediate_size"));
}

TEST_CASE("flat configs with aliases parse like nested ones", "[engine][config]") {
  auto flat = parse_model_config(testing::read_all(testing::golden_dir("tiny-bf16-flat") + "/config.json"), "flat");
  REQUIRE(flat.ok());
  CHECK(flat->kda_heads > 0);
  CHECK(flat->kda_head_dim > 0);
  CHECK(flat->conv_kernel == 4);
  CHECK(flat->has_gate_lower_bound);
  CHECK_FALSE(flat->mxfp4_experts);
  auto nested = parse_model_config(testing::read_all(testing::golden_dir("tiny-mxfp4") + "/config.json"), "nested");
  REQUIRE(nested.ok());
  CHECK(nested->mxfp4_experts);
  CHECK(nested->attention[3] == AttentionKind::kMla);  // full_attn_layers is one-based: 4 → layer 3
  CHECK(nested->attention[2] == AttentionKind::kKda);
  auto missing = config_error([](auto& j) { j.erase("kda_num_heads"); }, "tiny-bf16-flat");
  CHECK(contains(missing, "missing required key 'kda_num_heads'"));
}

}  // namespace
}  // namespace nj
