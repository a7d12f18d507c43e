// The kernels the core registers for PrivateUse1 itself: the allocating factories and set_ (which only rebinds a
// storage), and the no-grad aten::linear. Views, resize_ and every other op go through the boxed kernel
// (decisions.cpp), so the device decides on them (a view's result is a view of the device storage: adopt() recovers
// it from the host alias).
#include "neuron_py.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/linear_ops.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/library.h>

namespace neuron {

// Python objects held for the life of the process are leaked on purpose: destroying them after the interpreter has
// finalized (static destructors) would touch Python without a GIL.
py::object& g_check_dtype = *new py::object();  // policy.check_device_dtype(op, dtype); None: no check
std::mutex g_dtype_mu;
std::vector<int> g_dtype_ok;  // scalar type -> checked OK in this settings epoch

int core_of_device(std::optional<at::Device> device) {
  if (!device.has_value() || device->index() < 0) return g_current.load();
  int idx = device->index();
  TORCH_CHECK(idx >= 0 && idx < g_cores.load(), "invalid device ordinal neuron:", idx, ": this machine has ",
              g_cores.load(), " NeuronCores");
  return idx;
}

void check_dtype(const char* op, at::ScalarType st) {
  int i = static_cast<int>(st);
  {
    std::lock_guard<std::mutex> lock(g_dtype_mu);
    if (i < static_cast<int>(g_dtype_ok.size()) && g_dtype_ok[i]) return;
  }
  py::gil_scoped_acquire gil;
  if (!g_check_dtype || g_check_dtype.is_none()) return;
  g_check_dtype(op, py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(st))));
  std::lock_guard<std::mutex> lock(g_dtype_mu);
  if (i >= static_cast<int>(g_dtype_ok.size())) g_dtype_ok.resize(i + 1, 0);
  g_dtype_ok[i] = 1;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin, std::optional<at::MemoryFormat> mf) {
  auto st = c10::dtype_or_default(dtype);
  if (dtype.has_value()) check_dtype("aten::empty.memory_format", st);
  int core = core_of_device(device);
  tl_core_for_alloc = core;
  auto t = at::detail::empty_generic(size, &g_alloc, dev_keys(), st, mf);
  tl_core_for_alloc = -1;
  return t;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device, std::optional<bool> pin) {
  auto st = c10::dtype_or_default(dtype);
  if (dtype.has_value()) check_dtype("aten::empty_strided", st);
  int core = core_of_device(device);
  tl_core_for_alloc = core;
  auto t = at::detail::empty_strided_generic(size, stride, &g_alloc, dev_keys(), st);
  tl_core_for_alloc = -1;
  return t;
}

// set_ (torch_openreg registers at::native's CPU ones; these bind the device storage without touching its memory).
at::Tensor& set_storage(at::Tensor& self, at::Storage source, c10::SymInt offset, c10::SymIntArrayRef size,
                        c10::SymIntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kDev, "set_: expected a neuron storage, got one on ", source.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_sizes_and_strides(C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride),
                              offset.expect_int());
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes()) / static_cast<int64_t>(self.dtype().itemsize());
  std::vector<c10::SymInt> size{c10::SymInt(n)}, stride{c10::SymInt(1)};
  return set_storage(self, std::move(source), c10::SymInt(0), size, stride);
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0,
                     g_alloc.allocate_on(0, self.device().index()), &g_alloc, /*resizable=*/true);
  std::vector<c10::SymInt> size{c10::SymInt(0)}, stride{c10::SymInt(1)};
  return set_storage(self, std::move(empty), c10::SymInt(0), size, stride);
}

// aten::linear as one device op when no gradient is recorded (what fused.py does for SDPA in Python): a Neuron
// compiler runs it as one kernel, and the device decides on it once (MATMUL: bf16 operands) instead of on t + addmm.
// With autograd recording, the composite lowering runs unchanged (at::native::linear, its CompositeImplicitAutograd).
at::Tensor fused_linear(c10::DispatchKeySet ks, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias) {
  bool grad = at::GradMode::is_enabled() &&
              (input.requires_grad() || weight.requires_grad() || (bias.has_value() && bias->requires_grad()));
  if (grad) return at::native::linear(input, weight, bias);
  at::AutoDispatchBelowADInplaceOrView below;
  return at::_ops::linear::redispatch(ks & c10::after_ADInplaceOrView_keyset, input, weight, bias);
}

}  // namespace neuron

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", neuron::empty_memory_format);
  m.impl("empty_strided", neuron::empty_strided);
  m.impl("set_.source_Storage", neuron::set_source_storage);
  m.impl("set_.source_Storage_storage_offset", neuron::set_storage);
  m.impl("set_", neuron::set_empty);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("linear", TORCH_FN(neuron::fused_linear));
}
