// The Python module neuron_backend/core.py loads: configuration, callbacks into dispatch.py, counters, the memory
// figures, and the host-alias/adoption primitives dispatch.py, transfers.py and attention.py use.
#include "neuron_py.h"

#include <torch/extension.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace neuron;
  install_hooks();
  m.def("configure", [](int cores, int64_t capacity) {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    g_cores = cores;
    g_capacity = capacity;
    if (static_cast<int>(g_mem.size()) < cores) g_mem.resize(cores);
  });
  m.def("set_callbacks", [](py::object dispatch, py::object decide, py::object resolve, py::object check_dtype) {
    neuron::g_dispatch = std::move(dispatch);
    neuron::g_decide = std::move(decide);
    neuron::g_resolve = std::move(resolve);
    neuron::g_check_dtype = std::move(check_dtype);
  });
  m.def("clear_decisions", []() {
    {
      std::lock_guard<std::mutex> lock(g_dec_mu);
      g_decisions.clear();
    }
    std::lock_guard<std::mutex> lock(g_dtype_mu);
    g_dtype_ok.clear();
  });
  m.def("set_fast", [](bool on) { g_fast = on; });
  m.def("set_wide", [](bool on) { g_any_wide = on; });
  m.def("host_syncs", []() { return g_host_syncs.load(); });
  m.def("counts", []() { return std::make_pair(g_fast_count.load(), g_slow_count.load()); });
  m.def("cover", &cover);
  m.def("host", &host_alias, "A CPU tensor aliasing the device tensor's memory (same storage bytes, same view).");
  m.def("adopt", &adopt, "A host tensor as a device tensor on a core, without a copy.");
  m.def("replay_sdpa", &replay_sdpa, "attention.py's accepted SDPA replay, run in C++ (None: a reshape would copy)");
  m.def("touch", &touch, "Mark a device tensor's storage written (a write outside the C++ fast path).");
  m.def("account", &account, "Account a host tensor's storage as device memory until the storage dies.");
  m.def("sync", &sync_from_host, "Give a device tensor the metadata/storage its host alias now has.");
  m.def("set_current", [](int core) { g_current = core; });
  m.def("current", []() { return g_current.load(); });
  m.def("used", []() { return g_ever_reserved.load(); });
  m.def("block_size", &block_size);
  m.def("stats", [](int core) {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    CoreMemory& mm = mem_of(core);
    return std::make_tuple(mm.allocated, mm.reserved, mm.peak, mm.peak_reserved);
  });
  m.def("reset_peak", [](int core) {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    CoreMemory& mm = mem_of(core);
    mm.peak = mm.allocated;
    mm.peak_reserved = mm.reserved;
  });
  m.def("empty_cache", []() {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    for (auto& mm : g_mem) release_cache(mm);
  });
  m.def("check_fits", &check_fits, "Raise torch.OutOfMemoryError if a request could not be reserved.");
  m.def("is_device", &is_dev, "Whether the tensor's memory is device memory (a fake neuron tensor's is not).");
  m.def("is_host", &is_real_host, "Whether the tensor is a host tensor with host memory.");
  m.def("is_alias", &is_alias, "Whether a host tensor is a host alias of device memory.");
}
