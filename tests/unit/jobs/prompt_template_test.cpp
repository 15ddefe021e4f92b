// The classification template grammar: placeholders, escapes and positioned errors.
#include "jobs/spec/prompt_template.h"

#include <catch2/catch.hpp>

namespace nj::jobs {
namespace {

TEST_CASE("a template splits at {document}, expands {labels} and unescapes braces",
          "[jobs][classify]") {
  auto t = expand_template("Classify as one of: {labels}. {{json}}\nTicket: {document}\nLabel:\n",
                           {"billing", "bug"});
  REQUIRE(t.ok());
  CHECK(t->prefix == "Classify as one of: billing, bug. {json}\nTicket: ");
  CHECK(t->suffix == "\nLabel:");  // trailing whitespace of the template removed
  auto end = expand_template("{labels} }} {document}", {"a"});
  REQUIRE(end.ok());
  CHECK(end->prefix == "a } ");
  CHECK(end->suffix.empty());
}

TEST_CASE("template errors say what and where inside the template", "[jobs][classify]") {
  auto none = expand_template("Ticket: {doc}\n", {"a"});
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.status().message(),
             Catch::Contains("unknown placeholder '{doc}' at line 1, column 9"));
  auto missing = expand_template("Label the text.\nLabel:", {"a"});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("no {document} placeholder"));
  auto twice = expand_template("{document}\n{document}", {"a"});
  REQUIRE_FALSE(twice.ok());
  CHECK_THAT(twice.status().message(), Catch::Contains("{document} appears twice"));
  CHECK_THAT(twice.status().message(), Catch::Contains("line 2, column 1"));
  auto open = expand_template("{document} {\"a\": 1}", {"a"});
  REQUIRE_FALSE(open.ok());
  CHECK_THAT(open.status().message(), Catch::Contains("unmatched '{' at line 1, column 12"));
  auto close = expand_template("{document} }", {"a"});
  REQUIRE_FALSE(close.ok());
  CHECK_THAT(close.status().message(), Catch::Contains("unmatched '}'"));
}

}  // namespace
}  // namespace nj::jobs
