// Which CPUs poslab may use. OpenMP's binding (OMP_PROC_BIND, OMP_PLACES) pins the initial thread to the
// first place as the runtime loads, before main; a process started from that thread (poslab's own re-exec,
// compare's cells) inherits the pin, and all its threads then share one core. These helpers recover the
// CPUs the process started with and hand them, or a share of them, to what it starts.
#pragma once
#include <sched.h>

#include <vector>

namespace poslab {

// True when OpenMP binds threads to places (OMP_PROC_BIND other than false, or OMP_PLACES set).
bool openmp_binds();
// The CPUs this process started with: under OpenMP binding the union of its places, else the affinity
// mask (taskset, a cgroup's cpuset). Never empty.
std::vector<int> usable_cpus();

// Sets the calling thread's CPUs to `cpus` until destroyed, then restores them: a process spawned
// meanwhile starts with `cpus`. Does nothing when `cpus` is empty.
class ThreadAffinity {
 public:
  explicit ThreadAffinity(const std::vector<int>& cpus);
  ~ThreadAffinity();
  ThreadAffinity(const ThreadAffinity&) = delete;
  ThreadAffinity& operator=(const ThreadAffinity&) = delete;

 private:
  bool set_ = false;
  cpu_set_t previous_{};
};

}  // namespace poslab
