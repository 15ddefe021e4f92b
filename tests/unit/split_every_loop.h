// While alive, every row-parallel loop of the engine (ops::parallel_rows, the KDA short conv)
// splits its rows over the threads however few there are, so that the small test models run
// the threaded paths that only passes of thousands of rows take otherwise.
#pragma once

#include "engine/ops/parallel.h"

namespace nj::testing {

struct SplitEveryLoop {
  SplitEveryLoop() { ops::parallel_min_work = 0.0; }
  ~SplitEveryLoop() { ops::parallel_min_work = ops::kParallelMinWork; }
  SplitEveryLoop(const SplitEveryLoop&) = delete;
  SplitEveryLoop& operator=(const SplitEveryLoop&) = delete;
};

}  // namespace nj::testing
