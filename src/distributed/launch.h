// Which process of a data-parallel run this is, read from the variables the usual launchers set
// (torchrun, Slurm's srun, Open MPI's mpirun). Pure parsing: nothing connects here, so a bad
// launch is refused (ConfigError, exit 2) before anything is written.
#pragma once
#include <functional>
#include <string>

namespace poslab {

struct Launch {
  int rank = 0;
  int world_size = 1;           // 1: a single process, no process group
  int local_rank = 0;           // this process's index on its machine (the CUDA device it takes)
  int local_world_size = 0;     // processes on this machine; 0 when the launcher does not say
  std::string master_addr;      // host of the rendezvous store
  int master_port = 29500;
  bool agent_store = false;     // torchrun's agent already serves the store: every rank is a client
  std::string restart_count = "0";  // torchrun: names the store prefix of this attempt
  std::string launcher;         // RANK/WORLD_SIZE (torchrun and the like) | slurm | mpirun, for messages
  bool distributed() const { return world_size > 1; }
};

// Looks a variable up: returns nullptr when unset. Tests pass their own table.
using EnvLookup = std::function<const char*(const char*)>;

// RANK/WORLD_SIZE (torchrun and anything env://-style), else SLURM_PROCID/SLURM_NTASKS, else
// OMPI_COMM_WORLD_RANK/SIZE; none of them (or a world of 1): a single process. MASTER_ADDR is
// required for a world above 1, MASTER_PORT defaults to 29500. Throws ConfigError naming the variable.
Launch detect_launch(const EnvLookup& env);
Launch detect_launch();  // from the process environment
// Whether `name` is one of the variables a launcher sets for its ranks (those detect_launch reads, the
// rendezvous's, torchrun's TORCHELASTIC_*, Open MPI's OMPI_COMM_WORLD_*): what a process that starts
// single-process children (compare's cells) keeps from them.
bool launch_variable(const std::string& name);

}  // namespace poslab
