// Thread count for the OpenMP kernels.
//
// Results never depend on the thread count (see DESIGN.md, determinism), so
// this is purely a speed setting.
#ifndef CT_CORE_THREADS_H
#define CT_CORE_THREADS_H

// Sets the number of threads the kernels use (n >= 1).
void ct_set_threads(int n);
// The number of threads the kernels use now.
int ct_get_threads(void);
// Applies CT_THREADS, else OMP_NUM_THREADS, else the number of cores.
// Returns the resulting thread count.
int ct_threads_from_env(void);
// The same, with the cores shared by `sharers` processes (data-parallel
// ranks on one machine): without CT_THREADS or OMP_NUM_THREADS each gets
// its share (at least 1).
int ct_threads_from_env_shared(int sharers);
// The cores this process may run on (its CPU affinity): 1 for an MPI rank
// that mpirun bound to one core.
int ct_threads_available(void);

#endif
