// The disk rate a run will see: the model's own weight files read the way a streaming run
// reads them (O_DIRECT, its I/O threads, in order, over and over), for long enough that a
// cache behind the device (a host-backed disk caches on the host side) has had its say.
// `nightjar plan SPEC --measure-disk SECONDS` predicts with it.
//
// The rate reported is that of the probe's second half: a model small enough for the
// host's cache is by then read again from it, as a run that reads it pass after pass is;
// a model larger than the probe reads is read cold throughout, as a run of it is.
#pragma once

#include <cstdint>
#include <string>

#include "engine/util/status.h"

namespace nj::runner {

struct ModelReadProbe {
  double gbps = 0;        // bytes / seconds of the reads in the second half
  double first_gbps = 0;  // the same over the first half (cold, for the record)
  uint64_t bytes = 0;     // read in all
  double seconds = 0;     // spent in all
  int passes = 0;         // complete readings of the model's files
};

// Reads the *.safetensors files of `model_dir` (in name order, in slices of up to 1 GiB)
// with `io_threads` threads for about `seconds`. REQUIRES: seconds > 0, io_threads >= 1.
// Errors: NotFound when the directory holds no weight file; the reads' IOError.
Result<ModelReadProbe> probe_model_reads(const std::string& model_dir, double seconds,
                                         int io_threads);

}  // namespace nj::runner
