// `nightjar report --out FILE.html`: the morning summary as one self-contained page.
//
// The page is XHTML-compatible (well-formed XML: every element closed, attributes quoted,
// only the five XML entities), so an XML parser can check it. It fetches nothing: styles
// are one inline <style> block without url(), charts are inline <svg>; no scripts, links,
// images or namespace URIs (inline SVG in HTML needs no xmlns). Every text from the store
// (job names, ids, errors, labels, paths) is escaped.
//
// Per job: the summary figures of report.h, an I/O-share bar, and a timeline with one bar
// per item from started_at to finished_at, its left part (the item's io_wait share of its
// engine time) drawn as disk wait and the rest as compute; an item still running gets a
// bar from started_at to the report's time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runner/report/report.h"

namespace nj::runner {

// Text with &, <, >, " and ' replaced by entities (safe in elements and attributes), and
// control characters shown as escapes (runner/report/printable.h).
std::string html_escape(std::string_view text);

// The page for `jobs` with at most `max_items` items per job in its item table and
// timeline (0 = all); `generated_at` (Unix seconds) is printed in its header.
std::string report_html(const std::vector<JobReport>& jobs, double generated_at, size_t max_items);

}  // namespace nj::runner
