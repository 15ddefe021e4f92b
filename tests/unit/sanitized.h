// Whether this is the sanitizer build (-DNIGHTJAR_SANITIZE=ON, deploy/test-sanitize.sh), whose
// instrumented code runs 10-30x slower: the few tests whose matrices multiply into minutes
// there run a documented part of the matrix (the normal build runs all of it).
#pragma once

#ifndef NJ_SANITIZED
#define NJ_SANITIZED 0
#endif

namespace nj::testing {
inline constexpr bool kSanitized = NJ_SANITIZED != 0;
}  // namespace nj::testing
