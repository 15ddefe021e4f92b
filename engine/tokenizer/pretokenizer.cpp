// The K3 pre-tokenizer: run splitting and a hand-written matcher for the pattern in
// pretokenizer.h.
//
// How the matcher reproduces the regex. A backtracking engine (and the regex crate,
// whose leftmost-first semantics give the same match) tries the alternatives in order
// at the current position and takes the first way the pattern can succeed, preferring
// more repetitions for greedy quantifiers. Per alternative that works out to:
//
//  Letters, with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] ("upper-ish"),
//  W = [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] ("lower-ish"), C = the contractions,
//  P = [^\r\n\p{L}\p{N}]:
//   - P?U*W+C? : take the optional P if present (else, or if the rest fails, start
//     without it). U* eats the maximal U run [j,k). If the character at k is in W,
//     W+ is the maximal W run from k. Otherwise U* gives characters back until W+ can
//     start: at the last W character of the run, and W+ is that one character
//     (everything after it in the run is not in W). No W anywhere: no match.
//     C? then takes a contraction if one follows.
//   - P?U+W*C? : the maximal U run, which must be non-empty, then the maximal W run
//     (possibly empty), then C?.
//   U and W overlap (Lm, Lo, M), which is why the give-back case exists.
//  \p{N}{1,3}        : up to three numbers.
//  ' ?[^\s\p{L}\p{N}]+[\r\n]*' : an optional U+0020 then a non-empty run of
//     "punctuation" (not space, letter or number), then any \r\n run.
//  \s*[\r\n]+        : the whitespace run, given back to just after its last \r or \n.
//  \s+(?!\S)         : the whitespace run if it reaches the end of the segment, else
//     all of it but its last character (when that leaves at least one).
//  \s+               : the whitespace run (one character, followed by a non-space).
#include "engine/tokenizer/pretokenizer.h"

#include "engine/tokenizer/unicode_class.h"
#include "engine/tokenizer/utf8.h"

namespace nj::tok {
namespace {

struct Char {
  uint32_t cp;
  uint32_t len;
  uint8_t cls;
};

// REQUIRES: p < end.
inline Char char_at(const uint8_t* p, const uint8_t* end) {
  if (*p < 0x80) return {*p, 1, detail::kCharClassBlocks[0][*p]};
  const Utf8Char u = decode_utf8(p, end);
  return {u.cp, u.len, char_class(u.cp)};
}

constexpr uint8_t kPrefixExcluded = kLetter | kNumber | kLineBreak;  // [^\r\n\p{L}\p{N}]
constexpr uint8_t kPunctExcluded = kSpace | kLetter | kNumber;       // [^\s\p{L}\p{N}]

// The end of the run of characters from p that have any of `bits`.
inline const uint8_t* skip_any(const uint8_t* p, const uint8_t* end, uint8_t bits) {
  while (p < end) {
    const Char c = char_at(p, end);
    if (!(c.cls & bits)) break;
    p += c.len;
  }
  return p;
}

// The end of the run of characters from p that have none of `bits`.
inline const uint8_t* skip_none(const uint8_t* p, const uint8_t* end, uint8_t bits) {
  while (p < end) {
    const Char c = char_at(p, end);
    if (c.cls & bits) break;
    p += c.len;
  }
  return p;
}

inline bool ascii_is(uint8_t b, char lower) {
  return (b | 0x20) == static_cast<uint8_t>(lower);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)? at p: the end of the contraction, or p. Under Unicode
// simple case folding the only non-ASCII character equal to one of these letters is
// U+017F LATIN SMALL LETTER LONG S (folds to 's'); U+212A KELVIN SIGN folds to 'k',
// which is not among them.
inline const uint8_t* skip_contraction(const uint8_t* p, const uint8_t* end) {
  if (end - p < 2 || p[0] != '\'') return p;
  const uint8_t a = p[1];
  if (ascii_is(a, 's') || ascii_is(a, 't') || ascii_is(a, 'm') || ascii_is(a, 'd')) return p + 2;
  if (a == 0xC5 && end - p >= 3 && p[2] == 0xBF) return p + 3;  // 'ſ
  if (end - p >= 3) {
    const uint8_t b = p[2];
    if ((ascii_is(a, 'r') && ascii_is(b, 'e')) || (ascii_is(a, 'v') && ascii_is(b, 'e')) ||
        (ascii_is(a, 'l') && ascii_is(b, 'l')))
      return p + 3;
  }
  return p;
}

// U*W+C? from j; nullptr when it cannot match.
inline const uint8_t* match_upper_star_lower_plus(const uint8_t* j, const uint8_t* end) {
  const uint8_t* q = j;
  const uint8_t* last_lower_end = nullptr;  // just past the run's last W character
  while (q < end) {
    const Char c = char_at(q, end);
    if (!(c.cls & kUpperish)) break;
    q += c.len;
    if (c.cls & kLowerish) last_lower_end = q;
  }
  if (q < end && (char_at(q, end).cls & kLowerish)) {
    return skip_contraction(skip_any(q, end, kLowerish), end);
  }
  if (last_lower_end != nullptr) return skip_contraction(last_lower_end, end);
  return nullptr;
}

// U+W*C? from j; nullptr when it cannot match.
inline const uint8_t* match_upper_plus_lower_star(const uint8_t* j, const uint8_t* end) {
  const uint8_t* q = skip_any(j, end, kUpperish);
  if (q == j) return nullptr;
  return skip_contraction(skip_any(q, end, kLowerish), end);
}

// The end of the match that starts at p. REQUIRES: p < end.
const uint8_t* match_at(const uint8_t* p, const uint8_t* end) {
  const Char c = char_at(p, end);

  // [\p{Han}]+
  if (c.cls & kHan) return skip_any(p, end, kHan);

  // The two letter alternatives, each first with the optional prefix character.
  if (c.cls & (kUpperish | kLowerish) || !(c.cls & kPrefixExcluded)) {
    const uint8_t* after_prefix = (c.cls & kPrefixExcluded) ? nullptr : p + c.len;
    const uint8_t* e = nullptr;
    if (after_prefix && (e = match_upper_star_lower_plus(after_prefix, end))) return e;
    if ((e = match_upper_star_lower_plus(p, end))) return e;
    if (after_prefix && (e = match_upper_plus_lower_star(after_prefix, end))) return e;
    if ((e = match_upper_plus_lower_star(p, end))) return e;
  }

  // \p{N}{1,3}
  if (c.cls & kNumber) {
    const uint8_t* q = p + c.len;
    for (int i = 1; i < 3 && q < end; ++i) {
      const Char d = char_at(q, end);
      if (!(d.cls & kNumber)) break;
      q += d.len;
    }
    return q;
  }

  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const uint8_t* punct = nullptr;
  if (c.cp == ' ' && p + 1 < end && !(char_at(p + 1, end).cls & kPunctExcluded)) {
    punct = p + 1;
  } else if (!(c.cls & kPunctExcluded)) {
    punct = p;
  }
  if (punct) return skip_any(skip_none(punct, end, kPunctExcluded), end, kLineBreak);

  // The whitespace alternatives. Here c is whitespace: every character is a letter, a
  // number, whitespace or punctuation, and the others have returned above.
  const uint8_t* q = p;
  const uint8_t* last_start = p;
  const uint8_t* last_break_end = nullptr;
  while (q < end) {
    const Char d = char_at(q, end);
    if (!(d.cls & kSpace)) break;
    last_start = q;
    q += d.len;
    if (d.cls & kLineBreak) last_break_end = q;
  }
  if (last_break_end) return last_break_end;  // \s*[\r\n]+
  if (q == end) return q;                     // \s+(?!\S) at the end of the segment
  if (last_start != p) return last_start;     // \s+(?!\S): all but the last character
  if (q != p) return q;                       // \s+
  return p + c.len;  // unreachable (c is whitespace); never loop without progress
}

}  // namespace

RunSplitter::RunSplitter(std::string_view text, size_t max_run_chars)
    : pos_(reinterpret_cast<const uint8_t*>(text.data())),
      end_(reinterpret_cast<const uint8_t*>(text.data()) + text.size()),
      max_run_chars_(max_run_chars) {}

bool RunSplitter::next(std::string_view* segment) {
  if (done_) return false;
  const uint8_t* start = pos_;
  // A segment has at most as many characters as bytes: short tails need no scan.
  if (static_cast<size_t>(end_ - start) <= max_run_chars_) {
    *segment = {reinterpret_cast<const char*>(start), static_cast<size_t>(end_ - start)};
    done_ = true;
    return true;
  }
  // The reference: a counter of the current run's length, reset when the kind
  // (whitespace or not) changes; the character that would make it exceed the limit
  // starts a new segment (and a new run of length 1).
  const uint8_t* p = start;
  bool run_is_space = (char_at(p, end_).cls & kPySpace) != 0;
  size_t run_len = 0;
  while (p < end_) {
    const Char c = char_at(p, end_);
    const bool is_space = (c.cls & kPySpace) != 0;
    if (is_space != run_is_space) {
      run_is_space = is_space;
      run_len = 1;
    } else if (++run_len > max_run_chars_) {
      *segment = {reinterpret_cast<const char*>(start), static_cast<size_t>(p - start)};
      pos_ = p;
      // Resume the count in the next call: the character at p starts a run of 1. The
      // next call rescans from p, which reproduces exactly that state.
      return true;
    }
    p += c.len;
  }
  *segment = {reinterpret_cast<const char*>(start), static_cast<size_t>(end_ - start)};
  done_ = true;
  return true;
}

PieceScanner::PieceScanner(std::string_view segment)
    : pos_(reinterpret_cast<const uint8_t*>(segment.data())),
      end_(reinterpret_cast<const uint8_t*>(segment.data()) + segment.size()) {}

bool PieceScanner::next(std::string_view* piece) {
  if (pos_ >= end_) return false;
  const uint8_t* e = match_at(pos_, end_);
  *piece = {reinterpret_cast<const char*>(pos_), static_cast<size_t>(e - pos_)};
  pos_ = e;
  return true;
}

std::vector<std::string_view> pre_tokenize(std::string_view text, size_t max_run_chars) {
  std::vector<std::string_view> pieces;
  RunSplitter runs(text, max_run_chars);
  std::string_view segment, piece;
  while (runs.next(&segment)) {
    PieceScanner scanner(segment);
    while (scanner.next(&piece)) pieces.push_back(piece);
  }
  return pieces;
}

}  // namespace nj::tok
