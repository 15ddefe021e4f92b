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
