// The GPU a run or benchmark used, as its JSON records it (name, memory, compute capability), read from
// the CUDA driver (libcuda.so.1, loaded at run time: a CPU build and a machine without the driver have none).
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace poslab {

// {"name", "memory_mb", "capability": "9.0"} of CUDA device `index`; null without a driver or such a device.
nlohmann::json gpu_info(int index);
// gpu_info() in one line: "NVIDIA H200 (143771 MB, compute capability 9.0)"; "" for null.
std::string describe_gpu(const nlohmann::json& gpu);

}  // namespace poslab
