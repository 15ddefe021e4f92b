// `nightjar tokenize` and `nightjar detokenize`: the model's tokenizer on the command line.
//
//   nightjar tokenize   --model DIR (--text T | --file F) [--specials] [--output json]
//   nightjar tokenize   --model DIR --chat-file F.json [--thinking] [--thinking-effort LEVEL]
//                       [--output json]
//   nightjar detokenize --model DIR --ids 1,2,3 [--output json]
//
// tokenize prints the ids space-separated, or {"ids": [...]}. Special-token names in
// the input are plain text unless --specials is given. With --chat-file (an OpenAI chat
// body's messages, jobs/chat/chat_messages.h) it prints the prompt the model gets for that
// conversation in K3's chat format (jobs/chat/chat_format.h), as text (control tokens
// written as their names) then its ids on the next line, or {"text": "...", "ids": [...]}.
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
#include "jobs/chat/chat_format.h"
#include "jobs/chat/chat_messages.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/run/model_args.h"
#include "runner/cli/output.h"

namespace nj::runner {

// A text to tokenize is a development tool's input, not a prompt: larger than a prompt may be.
constexpr size_t kMaxTokenizeBytes = 256u << 20;
void add_tokenize_commands(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct TokenizeArgs {
    std::string model, text, file, chat_file, effort, output = "text";
    bool specials = false, thinking = false;
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
  CLI::Option* chat_opt = tok->add_option(
      "--chat-file", t->chat_file,
      "Render this conversation ({\"messages\": [...]}, as in an OpenAI chat request) in K3's "
      "chat format and print the prompt's text and ids");
  text_opt->excludes(file_opt);
  chat_opt->excludes(text_opt)->excludes(file_opt);
  CLI::Option* specials_opt = tok->add_flag(
      "--specials", t->specials, "Read special-token names such as <|open|> as their ids");
  specials_opt->excludes(chat_opt);
  CLI::Option* thinking_opt =
      tok->add_flag("--thinking", t->thinking,
                    "With --chat-file: thinking on (the effort message first; the reply opens "
                    "in the think channel)");
  CLI::Option* effort_opt = tok->add_option("--thinking-effort", t->effort,
                                            "With --thinking: low, medium, high or max "
                                            "(default max, the release's)")
                                ->check(CLI::IsMember({"low", "medium", "high", "max"}));
  thinking_opt->needs(chat_opt);
  effort_opt->needs(thinking_opt);
  tok->add_option("--output", t->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(tok, [t, text_opt, file_opt, chat_opt]() -> int {
    if (text_opt->count() == 0 && file_opt->count() == 0 && chat_opt->count() == 0) {
      return report_usage_error("tokenize", invalid_argument("give --text, --file or --chat-file"));
    }
    auto tokenizer = Tokenizer::load(t->model);
    if (!tokenizer.ok()) return report_failure(tokenizer.status());
    if (chat_opt->count() > 0) {
      if (auto controls = jobs::chat_controls(*tokenizer); !controls.ok())
        return report_failure(controls.status().with_context(t->model));
      jobs::ChatOptions options;
      options.thinking = t->thinking;
      if (!t->effort.empty()) options.effort = *jobs::parse_thinking_effort(t->effort);
      auto prompt = jobs::render_chat_file(*tokenizer, t->chat_file, options);
      if (!prompt.ok()) return report_failure(prompt.status());
      if (t->output == "json") {
        print_json(nlohmann::json{{"text", prompt->text}, {"ids", prompt->ids}});
      } else {
        std::string line;
        for (size_t i = 0; i < prompt->ids.size(); ++i)
          line += (i ? " " : "") + std::to_string(prompt->ids[i]);
        std::fwrite(prompt->text.data(), 1, prompt->text.size(), stdout);
        std::printf("\n%s\n", line.c_str());
      }
      return kExitOk;
    }
    std::string input = t->text;
    if (file_opt->count() > 0) {
      auto read = read_text_input(t->file, kMaxTokenizeBytes);
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
