// `nightjar tokenize` and `nightjar detokenize`: the model's tokenizer on the command line.
//
//   nightjar tokenize   --model DIR (--text T | --file F) [--specials] [--output json]
//   nightjar detokenize --model DIR --ids 1,2,3 [--output json]
//
// tokenize prints the ids space-separated, or {"ids": [...]}. Special-token names in
// the input are plain text unless --specials is given (for testing chat templates).
// detokenize writes the decoded bytes exactly as they are (no newline added; they may
// be invalid UTF-8), or {"text": "..."} where invalid UTF-8 becomes U+FFFD.
#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/io/file.h"
#include "engine/tokenizer/tokenizer.h"
#include "runner/commands.h"
#include "runner/model_args.h"
#include "runner/exit_codes.h"
#include "runner/output.h"

namespace nj::runner {
void add_tokenize_commands(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct TokenizeArgs {
    std::string model, text, file, output = "text";
    bool specials = false;
  };
  auto t = std::make_shared<TokenizeArgs>();
  CLI::App* tok =
      app.add_subcommand("tokenize", "Print the token ids of a text under the model's tokenizer");
  tok->add_option("--model", t->model,
                  "Model directory (with tiktoken.model and tokenizer_config.json)")
      ->required();
  CLI::Option* text_opt = tok->add_option("--text", t->text, "The text to encode");
  CLI::Option* file_opt =
      tok->add_option("--file", t->file, "Encode this file's bytes ('-' for standard input)");
  text_opt->excludes(file_opt);
  tok->add_flag("--specials", t->specials,
                "Read special-token names such as <|open|> as their ids");
  tok->add_option("--output", t->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(tok, [t, text_opt, file_opt]() -> int {
    if (text_opt->count() == 0 && file_opt->count() == 0) {
      return report_usage_error("tokenize", invalid_argument("give --text or --file"));
    }
    auto tokenizer = Tokenizer::load(t->model);
    if (!tokenizer.ok()) return report_failure(tokenizer.status());
    std::string input = t->text;
    if (file_opt->count() > 0) {
      auto read = read_text_input(t->file);
      if (!read.ok()) return report_failure(read.status());
      input = std::move(read).value();
    }
    const std::vector<int32_t> ids =
        t->specials ? tokenizer->encode_with_specials(input) : tokenizer->encode(input);
    if (t->output == "json") {
      print_json(nlohmann::json{{"ids", ids}});
    } else {
      std::string line;
      for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
      std::printf("%s\n", line.c_str());
    }
    return kExitOk;
  });

  struct DetokenizeArgs {
    std::string model, ids, output = "text";
  };
  auto d = std::make_shared<DetokenizeArgs>();
  CLI::App* detok =
      app.add_subcommand("detokenize", "Print the text of token ids under the model's tokenizer");
  detok
      ->add_option("--model", d->model,
                   "Model directory (with tiktoken.model and tokenizer_config.json)")
      ->required();
  detok->add_option("--ids", d->ids, "Comma-separated token ids, e.g. 1,2,3")->required();
  detok->add_option("--output", d->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(detok, [d]() -> int {
    auto ids = parse_id_list(d->ids, /*allow_empty=*/true);
    if (!ids.ok()) return report_usage_error("--ids", ids.status());
    auto tokenizer = Tokenizer::load(d->model);
    if (!tokenizer.ok()) return report_failure(tokenizer.status());
    const Status valid = tokenizer->check_ids(*ids);
    if (!valid.ok()) return report_usage_error("--ids", valid);
    const std::string text = tokenizer->decode(*ids);
    if (d->output == "json") {
      print_json(nlohmann::json{{"text", text}});
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
