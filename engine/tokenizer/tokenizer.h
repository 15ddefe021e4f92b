// The K3 tokenizer (k3-model.md §9): text → token ids → text.
//
// A model directory holds `tiktoken.model` (the BPE ranks, ids 0..R-1) and
// `tokenizer_config.json` (the special tokens, ids R..R+255; R = 163,584 for K3).
// Encoding is the K3 pre-tokenizer (pretokenizer.h) followed by rank BPE per piece
// (bpe.h); it agrees id for id with tiktoken given the same ranks and pattern.
// Decoding concatenates token bytes; use StreamDecoder (stream_decoder.h) to print
// text as it is generated.
//
// In a generation:
//   NJ_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(model_dir));
//   std::vector<int32_t> prompt = tok.encode(user_text);     // a base continuation
//   // or, for a chat, jobs/chat/chat_format.h: control tokens by special_id(), text runs
//   // (user text included) by encode()
//   StreamDecoder out(tok);
//   for each sampled id: stop at the model's eos; else print(out.push(id));
//   print(out.finish());
// User text always goes through encode(): it must never produce special ids.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/bpe.h"
#include "engine/util/status.h"

namespace nj {

// Immutable once loaded; every const method is safe to call from many threads.
// Movable, not copyable (the tables are tens of MiB for K3).
class Tokenizer {
 public:
  static constexpr int32_t kNumSpecialTokens = 256;
  static constexpr const char* kRanksFile = "tiktoken.model";
  static constexpr const char* kConfigFile = "tokenizer_config.json";

  // Loads <model_dir>/tiktoken.model and <model_dir>/tokenizer_config.json.
  // Fails with NotFound naming a missing file, or Corruption naming the file and the
  // line (a malformed line, a duplicate or missing rank) or the key (a special token
  // that collides with a rank, an eos_token that is not a special token).
  static Result<Tokenizer> load(const std::string& model_dir);

  // The same from the two files' contents; `dir` only prefixes error messages.
  static Result<Tokenizer> from_contents(std::string_view ranks_file, std::string_view config_file,
                                         const std::string& dir = "");

  // True when model_dir has a tiktoken.model, i.e. this model comes with a tokenizer
  // (load() may still fail on its contents).
  static bool exists_in(const std::string& model_dir);

  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Encodes user text. Special-token names in it ("<|close|>") are ordinary text and
  // never become special ids. Never fails: bytes that are not valid UTF-8 are
  // encoded as bytes, and decode() returns them unchanged.
  std::vector<int32_t> encode(std::string_view text) const;

  // Encodes text in which the special tokens' names stand for their ids: for chat
  // templates the program builds around user text, never for user text itself.
  // Where two names start at the same place the longer wins.
  std::vector<int32_t> encode_with_specials(std::string_view text) const;

  // The bytes of the ids, concatenated (special ids give their names). The result may
  // be invalid UTF-8, e.g. when the ids end inside a character. Ids outside the
  // vocabulary contribute nothing: check_ids() first when the ids come from outside.
  std::string decode(std::span<const int32_t> ids) const;

  // OK, or InvalidArgument naming the first id that is not in [0, vocab_size()).
  Status check_ids(std::span<const int32_t> ids) const;

  // The bytes of one id (a special's name for a special id); nullopt outside the
  // vocabulary. The view lives as long as the tokenizer.
  std::optional<std::string_view> token_bytes(int32_t id) const;

  // The id of a special token by name ("<|open|>", "<|reserved_token_163700|>").
  std::optional<int32_t> special_id(std::string_view name) const;
  bool is_special(int32_t id) const { return id >= num_ranks() && id < vocab_size(); }

  // End of sequence: tokenizer_config.json's eos_token. (The model's config.json
  // eos_token_id is what generation stops on; for K3 both are 163586.)
  int32_t eos_id() const { return eos_id_; }
  std::optional<int32_t> bos_id() const { return bos_id_; }

  int32_t num_ranks() const { return ranks_.size(); }
  int32_t vocab_size() const { return ranks_.size() + kNumSpecialTokens; }

  // Bytes held by the tables.
  size_t memory_bytes() const;

 private:
  Tokenizer() = default;

  // Encodes one segment of the run splitting, no specials, appending to out.
  void encode_segment(std::string_view segment, tok::BpeScratch* scratch,
                      std::vector<int32_t>* out) const;
  // The first special name in text at or after `from`: its offset and id, or npos.
  std::pair<size_t, int32_t> find_special(std::string_view text, size_t from) const;

  tok::BpeRanks ranks_;
  std::vector<std::string> special_names_;  // [256] name of id num_ranks() + i
  std::unordered_map<std::string, int32_t> special_ids_;
  // Per first byte, the specials starting with it, longest first (for encode_with_specials).
  std::vector<std::vector<int32_t>> specials_by_first_byte_;
  int32_t eos_id_ = -1;
  std::optional<int32_t> bos_id_;
};

}  // namespace nj
