// CPU affinity across OpenMP's binding: see affinity.h.
#include "util/affinity.h"

#include <pthread.h>

#include <algorithm>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace poslab {

static std::vector<int> cpus_in(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int id = 0; id < CPU_SETSIZE; ++id)
    if (CPU_ISSET(id, &set)) cpus.push_back(id);
  return cpus;
}

bool openmp_binds() {
#ifdef _OPENMP
  return omp_get_proc_bind() != omp_proc_bind_false && omp_get_num_places() > 0;
#else
  return false;
#endif
}

std::vector<int> usable_cpus() {
  std::vector<int> cpus;
#ifdef _OPENMP
  // OpenMP built its places from the mask the process started with; the initial thread's own mask is
  // now the first place only.
  if (openmp_binds()) {
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int p = 0; p < omp_get_num_places(); ++p) {
      std::vector<int> ids(static_cast<size_t>(omp_get_place_num_procs(p)));
      omp_get_place_proc_ids(p, ids.data());
      for (int id : ids)
        if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &all);
    }
    cpus = cpus_in(all);
  }
#endif
  if (cpus.empty()) {
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (::sched_getaffinity(0, sizeof mask, &mask) == 0) cpus = cpus_in(mask);
  }
  if (cpus.empty())  // no mask to read: every CPU the machine reports
    for (int id = 0; id < static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); ++id) cpus.push_back(id);
  return cpus;
}

ThreadAffinity::ThreadAffinity(const std::vector<int>& cpus) {
  if (cpus.empty() || ::pthread_getaffinity_np(::pthread_self(), sizeof previous_, &previous_) != 0) return;
  cpu_set_t wanted;
  CPU_ZERO(&wanted);
  for (int id : cpus)
    if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &wanted);
  set_ = ::pthread_setaffinity_np(::pthread_self(), sizeof wanted, &wanted) == 0;
}

ThreadAffinity::~ThreadAffinity() {
  if (set_) ::pthread_setaffinity_np(::pthread_self(), sizeof previous_, &previous_);
}

}  // namespace poslab
