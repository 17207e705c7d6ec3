// Launcher variables -> Launch. Every variable is checked, since a typo here would otherwise show
// up as a rank waiting for peers until the connect timeout.
#include "distributed/launch.h"

#include <cstdlib>
#include <string>

#include "config/config.h"

namespace poslab {

static int parse_int(const char* name, const char* text, int lo, int hi) {
  const std::string s = text;
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || v < lo || v > hi)
    throw ConfigError(std::string("distributed launch: ") + name + "='" + s + "' is not an integer in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(v);
}

namespace {
struct Names {
  const char *launcher, *rank, *size, *local_rank, *local_size;
};
// In this order: torchrun under Slurm sets both, and its own variables describe the ranks it started.
const Names kLaunchers[] = {
    {"RANK/WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
};
}  // namespace

bool launch_variable(const std::string& name) {
  for (const auto& k : kLaunchers)
    for (const char* n : {k.rank, k.size, k.local_rank, k.local_size})
      if (name == n) return true;
  return name == "MASTER_ADDR" || name == "MASTER_PORT" || name == "GROUP_RANK" ||
         name.rfind("OMPI_COMM_WORLD_", 0) == 0 || name.rfind("TORCHELASTIC_", 0) == 0;
}

Launch detect_launch(const EnvLookup& env) {
  Launch l;
  for (const auto& k : kLaunchers) {
    const char* rank = env(k.rank);
    const char* size = env(k.size);
    if (!rank && !size) continue;
    if (!rank || !size)
      throw ConfigError(std::string("distributed launch: ") + (rank ? k.size : k.rank) + " is missing (" +
                        (rank ? k.rank : k.size) + " is set); set both or neither");
    l.launcher = k.launcher;
    l.world_size = parse_int(k.size, size, 1, 1 << 20);
    l.rank = parse_int(k.rank, rank, 0, 1 << 20);
    if (l.rank >= l.world_size)
      throw ConfigError(std::string("distributed launch: ") + k.rank + "=" + rank + " must be below " + k.size + "=" +
                        size);
    if (const char* lr = env(k.local_rank)) l.local_rank = parse_int(k.local_rank, lr, 0, l.world_size - 1);
    // Slurm writes e.g. "2(x3)" here when nodes differ; only a plain number is used.
    if (const char* ls = env(k.local_size); ls && std::string(ls).find_first_not_of("0123456789") == std::string::npos)
      l.local_world_size = parse_int(k.local_size, ls, 1, l.world_size);
    break;
  }
  if (!l.distributed()) return Launch{};
  const char* addr = env("MASTER_ADDR");
  if (!addr || !*addr)
    throw ConfigError("distributed launch (" + l.launcher + ", world size " + std::to_string(l.world_size) +
                      "): MASTER_ADDR is not set; export the host of rank 0 (see README, Training on several processes)");
  l.master_addr = addr;
  if (const char* port = env("MASTER_PORT")) l.master_port = parse_int("MASTER_PORT", port, 1, 65535);
  const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
  l.agent_store = agent && (std::string(agent) == "True" || std::string(agent) == "1");
  if (const char* restarts = env("TORCHELASTIC_RESTART_COUNT")) l.restart_count = restarts;
  return l;
}

Launch detect_launch() {
  return detect_launch([](const char* name) { return std::getenv(name); });
}

}  // namespace poslab
