// `nightjar report --out FILE.html`: the morning summary as one self-contained page.
//
// The page is XHTML-compatible (well-formed XML: every element closed, attributes quoted,
// only the five XML entities), so an XML parser can check it. It fetches nothing: styles
// are one inline <style> block without url(), charts are inline <svg>; no scripts, links,
// images or namespace URIs (inline SVG in HTML needs no xmlns). Every text from the store
// (job names, ids, errors, labels, paths) is escaped.
//
// First a summary table across the jobs (failures first, as report_text) and a table of every
// failed item with its error. Per job, in that order: the summary figures of report.h; for a
// classify job a bar chart of its label counts and the review table (the lowest margins,
// ReportOptions::review); an I/O-share bar (only with engine time); the timeline's legend
// (every colour it draws, failed included); and a timeline with one bar
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
// control characters shown as escapes (runner/store/printable.h).
std::string html_escape(std::string_view text);

// The page for `jobs` with at most `options.max_items` items per job in its timeline and
// item table (0 = all; the table lists every failed item besides); `generated_at` (Unix
// seconds) is printed in its header. Elements a test finds by id: table#summary,
// table#failures (when any failed), svg.labels, table.review, table.items.
std::string report_html(const std::vector<JobReport>& jobs, double generated_at,
                        const ReportOptions& options);

}  // namespace nj::runner
