// The GPU's name, memory and compute capability from the CUDA driver API, looked up with dlopen so that
// poslab needs no CUDA headers or libraries to build, and says nothing where no driver is installed.
#include "util/gpu_info.h"

#include <dlfcn.h>

#include <cstddef>
#include <string>

namespace poslab {

nlohmann::json gpu_info(int index) {
  // The driver API's C signatures (cuda.h): CUresult is an int, CUdevice an int, 0 is CUDA_SUCCESS.
  using Init = int (*)(unsigned);
  using DeviceGet = int (*)(int*, int);
  using GetName = int (*)(char*, int, int);
  using TotalMem = int (*)(size_t*, int);
  using GetAttribute = int (*)(int*, int, int);
  constexpr int kCapabilityMajor = 75, kCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
  void* lib = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return nullptr;
  nlohmann::json out = nullptr;
  const auto init = reinterpret_cast<Init>(::dlsym(lib, "cuInit"));
  const auto device_get = reinterpret_cast<DeviceGet>(::dlsym(lib, "cuDeviceGet"));
  const auto get_name = reinterpret_cast<GetName>(::dlsym(lib, "cuDeviceGetName"));
  const auto total_mem = reinterpret_cast<TotalMem>(::dlsym(lib, "cuDeviceTotalMem_v2"));
  const auto attribute = reinterpret_cast<GetAttribute>(::dlsym(lib, "cuDeviceGetAttribute"));
  int device = 0, major = 0, minor = 0;
  char name[256] = {};
  size_t bytes = 0;
  if (init && device_get && get_name && total_mem && attribute && init(0) == 0 && device_get(&device, index) == 0 &&
      get_name(name, sizeof name - 1, device) == 0 && total_mem(&bytes, device) == 0 &&
      attribute(&major, kCapabilityMajor, device) == 0 && attribute(&minor, kCapabilityMinor, device) == 0)
    out = {{"name", std::string(name)},
           {"memory_mb", static_cast<int64_t>(bytes / (1024 * 1024))},
           {"capability", std::to_string(major) + "." + std::to_string(minor)}};
  ::dlclose(lib);
  return out;
}

std::string describe_gpu(const nlohmann::json& gpu) {
  if (!gpu.is_object()) return "";
  return gpu.value("name", std::string("unknown GPU")) + " (" + std::to_string(gpu.value("memory_mb", int64_t{0})) +
         " MB, compute capability " + gpu.value("capability", std::string("?")) + ")";
}

}  // namespace poslab
