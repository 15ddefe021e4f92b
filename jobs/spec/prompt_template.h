// Classification prompt templates: "...{labels}...{document}..." -> the fixed text before
// the document (prefilled once per job) and the fixed text after it (fed with every
// document).
//
// Grammar (as Python's str.format, with two names):
//   template    := ( text | "{{" | "}}" | placeholder )*
//   placeholder := "{document}"   exactly once: where each document goes
//                | "{labels}"     any number of times: the labels joined with ", "
// "{{" and "}}" are literal braces; any other "{" or "}" is an error, as is any other name.
//
// The prompt ends where the template ends minus trailing whitespace (so the final newline of
// a YAML `|` block does not end the prompt), and each label is scored as its continuation
// " " + label (classify_labels.h).
#pragma once

#include <string>
#include <vector>

#include "engine/util/status.h"

namespace nj::jobs {

struct ExpandedTemplate {
  std::string prefix;  // text before {document}, placeholders expanded
  std::string suffix;  // text after {document}, placeholders expanded, trailing whitespace removed
};

// Expands `text` with `labels`. InvalidArgument whose message names the problem and where it
// is inside the template ("line 2, column 9"): no {document}, a second {document}, an
// unknown placeholder, an unmatched brace.
Result<ExpandedTemplate> expand_template(const std::string& text,
                                         const std::vector<std::string>& labels);

}  // namespace nj::jobs
