// tokenizer_probe: the C++ side of the tokenizer parity test and the benchmark.
//
//   tokenizer_probe MODEL_DIR MODE < in.jsonl > out.jsonl
//
// Each input line is a JSON string (any text, newlines escaped). Per line, MODE:
//   encode    -> a JSON array of ids (Tokenizer::encode)
//   specials  -> a JSON array of ids (Tokenizer::encode_with_specials)
//   pieces    -> a JSON array of the pre-tokenizer's pieces (strings)
// MODE class-ranges reads nothing and prints the Unicode class table as maximal runs of
// code points with the same class bits, one JSON [first, last, bits] per line.
// Exit status 0, or 1 with a message on stderr.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_class.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tokenizer_probe MODEL_DIR encode|specials|pieces < in.jsonl\n");
    return 1;
  }
  const std::string mode = argv[2];
  if (mode == "class-ranges") {
    uint32_t first = 0;
    for (uint32_t cp = 1; cp <= 0x110000; ++cp) {
      if (cp == 0x110000 || nj::tok::char_class(cp) != nj::tok::char_class(first)) {
        std::printf("[%u, %u, %u]\n", first, cp - 1, nj::tok::char_class(first));
        first = cp;
      }
    }
    return 0;
  }
  auto tokenizer = nj::Tokenizer::load(argv[1]);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenizer_probe: %s\n", tokenizer.status().message().c_str());
    return 1;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    std::string text;
    try {
      text = nlohmann::json::parse(line).get<std::string>();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tokenizer_probe: input line %zu: %s\n", line_no, e.what());
      return 1;
    }
    nlohmann::json out = nlohmann::json::array();
    if (mode == "encode") {
      out = tokenizer->encode(text);
    } else if (mode == "specials") {
      out = tokenizer->encode_with_specials(text);
    } else if (mode == "pieces") {
      for (std::string_view p : nj::tok::pre_tokenize(text)) out.push_back(std::string(p));
    } else {
      std::fprintf(stderr, "tokenizer_probe: unknown mode '%s'\n", mode.c_str());
      return 1;
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  return 0;
}
