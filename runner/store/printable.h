// Text from specs, stores and models shown on a terminal or in a report: the commands
// (runner/cli/output.h) and the night's reports print ids and names through printable().
#pragma once

#include <string>
#include <string_view>

namespace nj::runner {

// `text` safe to print on a terminal: control characters (C0, DEL and the UTF-8 encoded C1
// controls) become visible escapes, "\n", "\t", "\r", else "\xNN" or "\u00NN", so that an
// id or a name from a spec can neither move the cursor, recolour the screen nor cut a line.
std::string printable(std::string_view text);

}  // namespace nj::runner
