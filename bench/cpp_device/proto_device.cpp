// A minimal C++ PrivateUse1 device ("proto"), in the manner of PyTorch's torch_openreg
// (pytorch/pytorch test/cpp_extensions/open_registration_extension/torch_openreg): host memory behind a device
// allocator, a device guard, the factory/copy/view kernels registered in C++, and every other op through ATen's boxed
// CPU fallback (aten/src/ATen/native/CPUFallback.h: inputs to CPU, the CPU kernel, results back). A benchmark
// prototype only (bench/bench_cpp_device.py): it has none of the simulated device's decisions, numerics or memory
// model; it measures what the per-op path costs once no Python tensor subclass is on it.
#include <ATen/native/CPUFallback.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <cstring>

namespace {

struct ProtoAllocator final : c10::Allocator {
  static void deleter(void* p) { free(p); }
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? malloc(n) : nullptr;
    return {p, p, &deleter, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &deleter; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { std::memcpy(dest, src, count); }
};
ProtoAllocator g_alloc;

struct ProtoGuard final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType T = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return T; }
  c10::Device exchangeDevice(c10::Device) const override { return c10::Device(T, 0); }
  c10::Device getDevice() const override { return c10::Device(T, 0); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
};

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>,
                               std::optional<at::MemoryFormat> mf) {
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, &g_alloc, ks, c10::dtype_or_default(dtype), mf);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, &g_alloc, ks, c10::dtype_or_default(dtype));
}

// Host memory on both sides: a copy is a CPU copy over aliases of the two storages.
at::Tensor cpu_alias(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(c10::kCPU));
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor s = self.device().is_cpu() ? self : cpu_alias(self);
  at::Tensor d = dst.device().is_cpu() ? dst : cpu_alias(dst);
  d.copy_(s, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  at::native::cpu_fallback(op, stack);
}

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, ProtoGuard);
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_alloc);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("resize_", TORCH_FN(at::native::resize_));
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}
