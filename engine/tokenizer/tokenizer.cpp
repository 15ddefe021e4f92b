// The Tokenizer: loading a model directory's tokenizer files, encode and decode.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "engine/io/file.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tiktoken_file.h"
#include "engine/tokenizer/tokenizer_config.h"

namespace nj {
namespace {

std::string join_path(const std::string& dir, const char* file) {
  if (dir.empty()) return file;
  return (std::filesystem::path(dir) / file).string();
}

}  // namespace

Result<Tokenizer> Tokenizer::load(const std::string& model_dir) {
  const std::string ranks_path = join_path(model_dir, kRanksFile);
  const std::string config_path = join_path(model_dir, kConfigFile);
  NJ_ASSIGN_OR_RETURN(std::string ranks_file, read_small_file(ranks_path));
  NJ_ASSIGN_OR_RETURN(std::string config_file, read_small_file(config_path));
  return from_contents(ranks_file, config_file, model_dir);
}

bool Tokenizer::exists_in(const std::string& model_dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(join_path(model_dir, kRanksFile), ec);
}

Result<Tokenizer> Tokenizer::from_contents(std::string_view ranks_file,
                                           std::string_view config_file, const std::string& dir) {
  const std::string ranks_name = join_path(dir, kRanksFile);
  const std::string config_name = join_path(dir, kConfigFile);
  NJ_ASSIGN_OR_RETURN(std::vector<std::string> tokens,
                      tok::parse_tiktoken_model(ranks_file, ranks_name));
  NJ_ASSIGN_OR_RETURN(tok::TokenizerConfig config,
                      tok::parse_tokenizer_config(config_file, config_name));

  Tokenizer t;
  t.ranks_ = tok::BpeRanks::build(tokens);
  const int32_t first_special = t.num_ranks();

  // Names: the file's, else the reference tokenizer's "<|reserved_token_ID|>".
  t.special_names_.resize(kNumSpecialTokens);
  for (const auto& [id, name] : config.added_tokens) {
    const std::string where =
        config_name + ": added_tokens_decoder[\"" + std::to_string(id) + "\"]";
    if (id < first_special) {
      return corruption(where + " is a BPE rank (" + ranks_name + " has " +
                        std::to_string(first_special) + "; specials start there)");
    }
    if (id >= first_special + kNumSpecialTokens) {
      return corruption(where + " is past the " + std::to_string(kNumSpecialTokens) +
                        " special ids (" + std::to_string(first_special) + ".." +
                        std::to_string(first_special + kNumSpecialTokens - 1) + ")");
    }
    t.special_names_[id - first_special] = name;
  }
  for (int32_t i = 0; i < kNumSpecialTokens; ++i) {
    std::string& name = t.special_names_[i];
    if (name.empty()) name = "<|reserved_token_" + std::to_string(first_special + i) + "|>";
    const auto [it, inserted] = t.special_ids_.emplace(name, first_special + i);
    if (!inserted) {
      return corruption(config_name + ": special tokens " + std::to_string(it->second) + " and " +
                        std::to_string(first_special + i) + " are both named '" + name + "'");
    }
  }
  t.specials_by_first_byte_.resize(256);
  for (int32_t i = 0; i < kNumSpecialTokens; ++i) {
    t.specials_by_first_byte_[static_cast<uint8_t>(t.special_names_[i][0])].push_back(
        first_special + i);
  }
  for (auto& ids : t.specials_by_first_byte_) {
    std::stable_sort(ids.begin(), ids.end(), [&t, first_special](int32_t a, int32_t b) {
      return t.special_names_[a - first_special].size() >
             t.special_names_[b - first_special].size();
    });
  }

  if (!config.eos_token) return corruption(config_name + ": no eos_token");
  const auto eos = t.special_id(*config.eos_token);
  if (!eos) {
    return corruption(config_name + ": eos_token '" + *config.eos_token +
                      "' is not a special token");
  }
  t.eos_id_ = *eos;
  if (config.bos_token) {
    t.bos_id_ = t.special_id(*config.bos_token);
    if (!t.bos_id_) {
      return corruption(config_name + ": bos_token '" + *config.bos_token +
                        "' is not a special token");
    }
  }
  return t;
}

void Tokenizer::encode_segment(std::string_view segment, tok::BpeScratch* scratch,
                               std::vector<int32_t>* out) const {
  tok::PieceScanner pieces(segment);
  std::string_view piece;
  while (pieces.next(&piece)) ranks_.encode_piece(piece, scratch, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  tok::BpeScratch scratch;
  tok::RunSplitter runs(text);
  std::string_view segment;
  while (runs.next(&segment)) encode_segment(segment, &scratch, &out);
  return out;
}

std::pair<size_t, int32_t> Tokenizer::find_special(std::string_view text, size_t from) const {
  for (size_t i = from; i < text.size(); ++i) {
    for (int32_t id : specials_by_first_byte_[static_cast<uint8_t>(text[i])]) {
      const std::string& name = special_names_[id - num_ranks()];
      if (text.compare(i, name.size(), name) == 0) return {i, id};
    }
  }
  return {std::string_view::npos, -1};
}

std::vector<int32_t> Tokenizer::encode_with_specials(std::string_view text) const {
  // As the reference: the run splitting first, then specials within each segment.
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  tok::BpeScratch scratch;
  tok::RunSplitter runs(text);
  std::string_view segment;
  while (runs.next(&segment)) {
    size_t start = 0;
    while (true) {
      const auto [at, id] = find_special(segment, start);
      if (at == std::string_view::npos) {
        encode_segment(segment.substr(start), &scratch, &out);
        break;
      }
      encode_segment(segment.substr(start, at - start), &scratch, &out);
      out.push_back(id);
      start = at + special_names_[id - num_ranks()].size();
    }
  }
  return out;
}

std::optional<std::string_view> Tokenizer::token_bytes(int32_t id) const {
  if (id >= 0 && id < num_ranks()) return ranks_.bytes_of(id);
  if (is_special(id)) return std::string_view(special_names_[id - num_ranks()]);
  return std::nullopt;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    if (const auto bytes = token_bytes(id)) out.append(*bytes);
  }
  return out;
}

Status Tokenizer::check_ids(std::span<const int32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return invalid_argument("token id " + std::to_string(ids[i]) + " (at position " +
                              std::to_string(i) + ") is outside the vocabulary (0.." +
                              std::to_string(vocab_size() - 1) + ")");
    }
  }
  return Status::ok_status();
}

std::optional<int32_t> Tokenizer::special_id(std::string_view name) const {
  const auto it = special_ids_.find(std::string(name));
  if (it == special_ids_.end()) return std::nullopt;
  return it->second;
}

size_t Tokenizer::memory_bytes() const {
  return ranks_.memory_bytes();
}

}  // namespace nj
