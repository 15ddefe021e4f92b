// Process-level settings that must be in place before the OpenMP runtime starts.
#pragma once

namespace nj {

// libgomp reads its environment once, when it loads, before main(). Its default spins idle
// threads between parallel regions; where vCPUs share a physical core (as on the machine
// this was measured on) the spinning steals the CPU from the thread doing the work, and
// decode ran 2x slower than with OMP_WAIT_POLICY=passive. Unless the user chose a policy,
// this re-executes the program once with OMP_WAIT_POLICY=passive. Returns if it cannot
// (the program then runs with libgomp's default).
void reexec_with_passive_omp_wait(char** argv);

}  // namespace nj

namespace nj {

// How many compute threads pay off here. Measures a short compute-bound loop (about 10 ms in
// all) on one thread and split over every CPU; returns the CPU count when that is clearly
// faster (at least 1.6x), else 1. On the machine this was built on, whose two vCPUs share one
// core's worth of time, splitting made every parallel region wait for a descheduled vCPU and
// decode ran 1.6x slower on 2 threads than on 1. Results never depend on the thread count.
int calibrate_compute_threads();

}  // namespace nj
