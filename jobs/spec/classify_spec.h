// The `classify` job kind's keys (the common keys are in spec_parser.h):
//
//   kind: classify
//   template: TEXT             required; the prompt around each document (prompt_template.h):
//                              {document} exactly once, {labels} any number of times (the
//                              labels joined with ", "), {{ and }} literal braces
//   labels: [TEXT, ...]        required, at least one; non-empty, unique, no leading or
//                              trailing whitespace. Each is scored as the continuation
//                              " " + label of the prompt (label_trie.h)
//   inputs:                    the documents: exactly one of `inputs` and `items`
//     glob: PATTERN            files (relative to the spec's directory); id = the file's path
//                              relative to the spec's directory; sorted by path
//     jsonl: PATH              or one document per line of a JSON Lines file ...
//     id_field: NAME           ... its id in this field (default "id") ...
//     text_field: NAME         ... and its text in this one (default "text")
//   items:                     or inline documents
//     - id: TEXT               unique within the job (the result's custom_id)
//       document: TEXT
//   outputs:                   optional files written (atomically) when the job's last item
//     jsonl: PATH              finishes, and by `nightjar results JOB --write`; relative to
//     csv: PATH                the spec's directory, and held to the output-path policy of
//                              jobs/output_paths.h (checked at submit, not here)
//
// A document is at most kMaxDocumentBytes (16 MiB, document_inputs.h), whichever input kind
// holds it. Generate keys (`defaults`, `prompt`, ...) are errors here, as classify keys are in a
// generate spec. Documents are read at parse time: a glob matching nothing, an unreadable
// file or a JSONL line without its fields is an error of the spec. Tokenizing the template,
// the documents and the labels needs the model's tokenizer (spec_model.h).
//
// Private to nightjar_jobs (spec_reader.h includes yaml-cpp).
#pragma once

#include <string>

#include "jobs/spec/job_spec.h"
#include "jobs/inputs/spec_reader.h"

namespace nj::jobs {

// Reads the classify keys of the top-level mapping into `spec` (errors into top.errors()).
// `base_dir` resolves input and output paths.
void read_classify_kind(MapReader& top, JobSpec& spec, const std::string& base_dir);

// Reports the keys of the kinds other than `kind` present in `top` as errors naming the kind
// they belong to (instead of "unknown key").
void report_other_kind_keys(MapReader& top, JobKind kind);

}  // namespace nj::jobs
