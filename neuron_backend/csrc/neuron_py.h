// What the translation units that call into Python share: the decision cache's types, the callbacks into
// neuron_backend/dispatch.py, and the boxed kernel's entry points (neuron.h lists the units).
#pragma once

#include "neuron.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace neuron {

// --- kernels.cpp -----------------------------------------------------------------------------------------------------
extern py::object& g_check_dtype;  // policy.check_device_dtype(op, dtype); None: no check
extern std::mutex g_dtype_mu;
extern std::vector<int> g_dtype_ok;

// --- decisions.cpp: the boxed kernel's decision cache ---------------------------------------------------------------
// kCast: int64 inputs computed as int32 (autocast.py) while no storage holds int64 values outside int32: the op runs
// on the 64-bit data and its int64 outputs are wrapped to int32 range (operands: run kind, whether outputs wrap).
// kToCopy: aten::_to_copy of a device tensor whose target dtype needs no Python (transfers.fast_to_copy);
// kScalar: aten::_local_scalar_dense (.item()), a counted host sync.
constexpr int kNative = 0, kMatmul = 1, kPython = 2, kCast = 3, kToCopy = 4, kScalar = 5;

struct __attribute__((visibility("hidden"))) OpInfo {
  py::object func;                     // the torch.ops OpOverload
  std::vector<int8_t> write_alias;     // per return: index of the argument it aliases (written), else -1
  std::vector<int8_t> view_of;         // per return: index of the argument it is a view of, else -1
  bool any_write = false;
  bool ok = false;
};

struct Key {
  const void* op;
  uint64_t dtypes;  // up to 8 dtypes, 8 bits each, in order
  int n;
  bool operator==(const Key& o) const { return op == o.op && dtypes == o.dtypes && n == o.n; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<const void*>()(k.op) ^ (std::hash<uint64_t>()(k.dtypes) * 31) ^ (static_cast<size_t>(k.n) << 3);
  }
};
struct Decision {
  int kind = kPython;
  std::vector<int> operands;  // MATMUL: argument positions rounded to bf16
};

extern std::atomic<uint64_t> g_host_syncs;
extern std::atomic<bool> g_any_wide;
extern std::mutex g_dec_mu;
extern std::unordered_map<Key, Decision, KeyHash> g_decisions;
extern py::object& g_dispatch;
extern py::object& g_decide;
extern py::object& g_resolve;
extern std::atomic<bool> g_fast;
extern std::atomic<uint64_t> g_fast_count, g_slow_count;

OpInfo& op_info(const c10::OperatorHandle& op);
void touch_written(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& arguments);
void boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void cover(const std::vector<std::string>& names);

// --- host_kernels.cpp: the fast path ---------------------------------------------------------------------------------
void run_fast(const c10::OperatorHandle& op, torch::jit::Stack* stack, const Decision& dec, int core);
void run_to_copy(const c10::OperatorHandle& op, torch::jit::Stack* stack, int core);

}  // namespace neuron
