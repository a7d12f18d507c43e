// The simulated NeuronCore device in C++, in the manner of PyTorch's torch_openreg
// (pytorch/pytorch test/cpp_extensions/open_registration_extension/torch_openreg: csrc/runtime/OpenRegDeviceAllocator.cpp,
// OpenRegGuard.h, csrc/aten/OpenRegMinimal.cpp): a PrivateUse1 allocator with the memory model of the device, a
// device guard, the empty/view kernels, and one boxed kernel for every other op with a decision cache per
// (op, input dtypes, requested dtype). Decisions come from the Python policy (neuron_backend/hardware, policy.py) the
// first time a key is seen; NATIVE and MATMUL (bf16 operand rounding) then run here on host aliases of the device
// memory, every other decision (CPU fallback, 64-bit/complex autocast, decompositions, typed errors, transfers,
// collectives) in neuron_backend/dispatch.py.
//
// Memory: device storage is host memory. A fresh result of a host kernel is adopted as device memory without a copy
// (the device DataPtr's context owns the host storage); a host alias of a device tensor (at::from_blob-like, over
// the whole device storage, same offset) lets host kernels read and write device memory in place.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/TensorUtils.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/linear_ops.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace neuron {

constexpr auto kDev = c10::DeviceType::PrivateUse1;

// ---------------------------------------------------------------------------------------------------------------
// Memory model (neuron_backend/memory.py documents the sources): per core allocated/reserved bytes and their peaks;
// a request is rounded to a block (power of two >= 256 B below 16 MB, exact above); a freed block stays reserved
// in a per-size cache and is reused by a request of the same block size; on a request that does not fit, the cache is
// released and the request retried before torch.OutOfMemoryError.
// ---------------------------------------------------------------------------------------------------------------
constexpr int64_t kMB = 1 << 20;
constexpr int64_t kRoundLimit = 16 * kMB;
constexpr int64_t kMinBlock = 256;

struct CoreMemory {
  int64_t allocated = 0, reserved = 0, peak = 0, peak_reserved = 0;
  std::unordered_map<int64_t, int64_t> cached;  // block bytes -> cached blocks of that size
};

std::mutex g_mem_mu;
std::vector<CoreMemory> g_mem(1);
int64_t g_capacity = 1LL << 40;
std::atomic<bool> g_ever_reserved{false};
std::atomic<int> g_cores{1};

int64_t block_size(int64_t n) {
  if (n >= kRoundLimit) return n;
  if (n <= kMinBlock) return kMinBlock;
  int64_t b = 1;
  while (b < n) b <<= 1;
  return b;
}

std::string fmt_mib(int64_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(n) / static_cast<double>(kMB));
  return buf;
}

CoreMemory& mem_of(int core) {
  if (core >= static_cast<int>(g_mem.size())) g_mem.resize(core + 1);
  return g_mem[core];
}

void release_cache(CoreMemory& m) {
  for (auto& [block, n] : m.cached) m.reserved -= block * n;
  m.cached.clear();
}

// Account one block of `block` bytes on `core` (the lock held). Throws c10::OutOfMemoryError (torch.OutOfMemoryError).
void take(int64_t block, int core) {
  CoreMemory& m = mem_of(core);
  int64_t new_total = m.allocated + block;
  auto it = m.cached.find(block);
  if (it != m.cached.end() && it->second > 0) {
    if (--it->second == 0) m.cached.erase(it);
  } else {
    if (m.reserved + block > g_capacity) {
      release_cache(m);
      if (m.reserved + block > g_capacity) {
        TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron:", core, " out of memory: tried to allocate ",
                         fmt_mib(block), "; NeuronCore ", core, " has a total capacity of ", fmt_mib(g_capacity),
                         ", of which ", fmt_mib(m.allocated), " is allocated and ", fmt_mib(g_capacity - m.reserved),
                         " is free (the profile's HBM per chip / logical NeuronCores per chip sets the capacity; "
                         "NEURON_MEMORY_GB overrides it).");
      }
    }
    m.reserved += block;
    g_ever_reserved = true;
    if (m.reserved > m.peak_reserved) m.peak_reserved = m.reserved;
  }
  if (new_total > m.peak) m.peak = new_total;
  m.allocated = new_total;
}

void give(int64_t block, int core) {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  CoreMemory& m = mem_of(core);
  m.allocated -= block;
  m.cached[block] += 1;
}

// The context of a device DataPtr: the accounted block, and the host memory behind it (malloc'd here, or a host
// storage adopted from a host kernel's result).
struct DevCtx {
  void* ptr = nullptr;
  int64_t block = 0;
  int core = 0;
  c10::DataPtr owned;      // memory allocated here (from the CPU allocator), else empty
  c10::Storage host;       // adopted host storage (keeps its memory alive), else empty
  c10::StorageImpl* host_key = nullptr;
  std::atomic<uint64_t> writes{0};  // bumped by every op that writes this storage (the bf16 operand cache's check)
};

std::mutex g_adopt_mu;
// host StorageImpl -> the device storage adopted over it (so a host storage adopted twice is counted once, as a
// view of a storage memory.py already counted added nothing).
std::unordered_map<c10::StorageImpl*, c10::weak_intrusive_ptr<c10::StorageImpl>> g_adopted;

void dev_delete(void* p) {
  auto* ctx = static_cast<DevCtx*>(p);
  if (ctx->block) give(ctx->block, ctx->core);
  if (ctx->host_key) {
    std::lock_guard<std::mutex> lock(g_adopt_mu);
    auto it = g_adopted.find(ctx->host_key);
    if (it != g_adopted.end() && it->second.expired()) g_adopted.erase(it);
  }
  delete ctx;  // frees `owned`, or drops the adopted host storage
}

thread_local int tl_core_for_alloc = -1;
std::atomic<int> g_current{0};

struct NeuronAllocator final : c10::Allocator {
  c10::DataPtr allocate_on(size_t n, int core) const {
    auto* ctx = new DevCtx();
    ctx->core = core;
    if (n) {
      ctx->block = block_size(static_cast<int64_t>(n));
      {
        std::lock_guard<std::mutex> lock(g_mem_mu);
        try {
          take(ctx->block, core);
        } catch (...) {
          delete ctx;
          throw;
        }
      }
      ctx->owned = c10::GetCPUAllocator()->allocate(n);
      ctx->ptr = ctx->owned.get();
    }
    return {ctx->ptr, ctx, &dev_delete, c10::Device(kDev, static_cast<c10::DeviceIndex>(core))};
  }
  c10::DataPtr allocate(size_t n) override {
    return allocate_on(n, tl_core_for_alloc >= 0 ? tl_core_for_alloc : g_current.load());
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { std::memcpy(dest, src, count); }
};
NeuronAllocator g_alloc;

// ---------------------------------------------------------------------------------------------------------------
// Host aliases and adoption
// ---------------------------------------------------------------------------------------------------------------
DevCtx* dev_ctx(const c10::Storage& st);

// Mark device storage written (every write path: the fast path's written arguments, dispatch.py's, transfers').
void touch(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return;
  if (DevCtx* c = dev_ctx(t.storage())) c->writes++;
}

struct AliasCtx {
  c10::Storage dev;
};
void alias_delete(void* p) { delete static_cast<AliasCtx*>(p); }

// A tensor whose memory is device memory. A FakeTensor reports its fake device (neuron) but holds meta storage: not one.
// A functional or Python-dispatched wrapper (FunctionalTensor, FakeTensor) reporting the device is not one either.
DevCtx* dev_ctx(const c10::Storage& st) {
  const auto& dp = st.data_ptr();
  return dp.get_deleter() == &dev_delete ? static_cast<DevCtx*>(dp.get_context()) : nullptr;
}

bool is_dev(const at::Tensor& t) {
  static const c10::DispatchKeySet wrappers({c10::DispatchKey::Python, c10::DispatchKey::Functionalize});
  return t.defined() && t.device().type() == kDev && !t.key_set().has_any(wrappers) && t.has_storage() &&
         t.storage().device_type() == kDev;
}

// A host tensor with host memory (not a fake or meta tensor while tracing).
bool is_real_host(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.has_storage() && t.storage().device_type() == c10::kCPU;
}

c10::DispatchKeySet dev_keys() {
  return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

// A CPU tensor over the whole storage of device tensor `t`, with t's sizes, strides and offset.
at::Tensor host_alias(const at::Tensor& t) {
  TORCH_CHECK(is_dev(t), "neuron host(): expected a neuron tensor, got one on ", t.device());
  const c10::Storage& st = t.storage();
  c10::DataPtr dp(st.mutable_data(), new AliasCtx{st}, &alias_delete, c10::Device(c10::kCPU));
  auto hs = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), st.sym_nbytes(), std::move(dp),
                                                  c10::GetCPUAllocator(), /*resizable=*/true);
  auto h = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(hs)),
                                                    c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  h.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return h;
}

// Host memory the device accounts without a device tensor over it (attention.py's replay runs its temporaries on the
// host): the host storage's DataPtr is wrapped so that its death releases the block, as a device storage's does.
struct AcctCtx {
  c10::DataPtr inner;
  int64_t block;
  int core;
};
void acct_delete(void* p) {
  auto* c = static_cast<AcctCtx*>(p);
  give(c->block, c->core);
  delete c;
}

void account(const at::Tensor& h, int core) {
  c10::StorageImpl* si = h.storage().unsafeGetStorageImpl();
  if (si == nullptr || si->nbytes() == 0 || si->data() == nullptr) return;
  auto del = si->data_ptr().get_deleter();
  if (del == &alias_delete || del == &acct_delete) return;
  {
    std::lock_guard<std::mutex> lock(g_adopt_mu);
    auto it = g_adopted.find(si);
    if (it != g_adopted.end() && !it->second.expired()) return;
  }
  int64_t block = block_size(static_cast<int64_t>(si->nbytes()));
  {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    take(block, core);
  }
  void* ptr = si->mutable_data();
  c10::DataPtr old = si->set_data_ptr(c10::DataPtr());
  si->set_data_ptr_noswap(c10::DataPtr(ptr, new AcctCtx{std::move(old), block, core}, &acct_delete,
                                       c10::Device(c10::kCPU)));
}

// The device storage that host storage `hs` stands for: the device storage it aliases, or `hs` adopted as a new
// device storage on `core` (accounted; the device DataPtr's context keeps the host storage alive).
c10::Storage device_storage_for(const c10::Storage& hs, int core) {
  if (hs.data_ptr().get_deleter() == &alias_delete) {
    return static_cast<AliasCtx*>(hs.data_ptr().get_context())->dev;
  }
  c10::StorageImpl* key = hs.unsafeGetStorageImpl();
  {
    std::lock_guard<std::mutex> lock(g_adopt_mu);
    auto it = g_adopted.find(key);
    if (it != g_adopted.end()) {
      auto strong = it->second.lock();
      if (strong) return c10::Storage(std::move(strong));
      g_adopted.erase(it);
    }
  }
  auto* ctx = new DevCtx();
  ctx->core = core;
  ctx->ptr = hs.mutable_data();
  int64_t n = static_cast<int64_t>(hs.nbytes());
  if (n && ctx->ptr && hs.data_ptr().get_deleter() != &acct_delete) {  // accounted already: not twice
    ctx->block = block_size(n);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    try {
      take(ctx->block, core);
    } catch (...) {
      delete ctx;
      throw;
    }
  }
  ctx->host = hs;
  ctx->host_key = key;
  c10::DataPtr dp(ctx->ptr, ctx, &dev_delete, c10::Device(kDev, static_cast<c10::DeviceIndex>(core)));
  auto ds = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), hs.sym_nbytes(), std::move(dp),
                                                  &g_alloc, /*resizable=*/true);
  {
    std::lock_guard<std::mutex> lock(g_adopt_mu);
    g_adopted.insert_or_assign(key, c10::weak_intrusive_ptr<c10::StorageImpl>(ds));
  }
  return c10::Storage(std::move(ds));
}

// Host tensor `h` as a device tensor on `core`: a view of the device storage it aliases, else its storage adopted.
at::Tensor adopt(const at::Tensor& h, int core) {
  TORCH_CHECK(h.device().is_cpu(), "neuron adopt: expected a host tensor, got ", h.device());
  TORCH_CHECK(h.layout() == c10::kStrided, "neuron adopt: expected a strided tensor");
  c10::Storage ds = device_storage_for(h.storage(), core);
  auto d = at::detail::make_tensor<c10::TensorImpl>(std::move(ds), dev_keys(), h.dtype());
  d.unsafeGetTensorImpl()->set_sizes_and_strides(h.sizes(), h.strides(), h.storage_offset());
  return d;
}

// After a host kernel changed the metadata (or, by resizing, the storage) of host alias `h` of device tensor `d`.
void sync_from_host(const at::Tensor& d, const at::Tensor& h) {
  auto* di = d.unsafeGetTensorImpl();
  if (h.storage().unsafeGetStorageImpl() != nullptr) {
    const c10::Storage& hs = h.storage();
    bool same = hs.data_ptr().get_deleter() == &alias_delete &&
                static_cast<AliasCtx*>(hs.data_ptr().get_context())->dev.unsafeGetStorageImpl() ==
                    d.storage().unsafeGetStorageImpl();
    if (!same) di->set_storage_keep_dtype(device_storage_for(hs, d.device().index()));
  }
  if (d.sizes() != h.sizes() || d.strides() != h.strides() || d.storage_offset() != h.storage_offset()) {
    di->set_sizes_and_strides(h.sizes(), h.strides(), h.storage_offset());
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Device guard (C10_REGISTER_GUARD_IMPL below): a C++ guard, so no Python runs in the guard's noexcept paths and the
// autograd engine knows every core (torch_openreg's OpenRegGuardImpl; the real backend registers NeuronGuardImpl).
// Streams: every op has finished when it returns; a stream only labels work (streams.py), so the guard's stream is
// the default one and waits/queries are immediate.
// ---------------------------------------------------------------------------------------------------------------
struct NeuronGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDev; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() >= 0) g_current = d.index();
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kDev, static_cast<c10::DeviceIndex>(g_current.load())); }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) g_current = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) g_current = d.index();
  }
  c10::Stream getStream(c10::Device d) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(g_cores.load()); }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
};

// What PyTorch asks a PrivateUse1 backend (torch_openreg's OpenRegHooksInterface): available and built, a context per
// core, and storage resizing (UntypedStorage.resize_, which FSDP2 uses to free and re-allocate unsharded parameters).
struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(g_cores.load()); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(g_current.load()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { g_current = d; }
  c10::Device getDeviceFromPtr(void*) const override { return c10::Device(kDev, 0); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* si = storage.unsafeGetStorageImpl();
    TORCH_CHECK(si->resizable(), "Trying to resize storage that is not resizable");
    int core = storage.device().index() >= 0 ? storage.device().index() : 0;
    c10::DataPtr fresh = g_alloc.allocate_on(newsize, core);
    size_t keep = std::min(newsize, si->nbytes());
    if (keep && si->data() != nullptr) std::memcpy(fresh.get(), si->data(), keep);
    si->set_data_ptr_noswap(std::move(fresh));  // the old block returns to the cache
    si->set_nbytes(newsize);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Kernels registered for PrivateUse1 in C++
// ---------------------------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------------------------
// The boxed kernel: decision cache, fast path, Python slow path
// ---------------------------------------------------------------------------------------------------------------
// kCast: int64 inputs computed as int32 (autocast.py) while no storage holds int64 values outside int32: the op runs
// on the 64-bit data and its int64 outputs are wrapped to int32 range (operands: run kind, whether outputs wrap).
// kToCopy: aten::_to_copy of a device tensor whose target dtype needs no Python (transfers.fast_to_copy);
// kScalar: aten::_local_scalar_dense (.item()), a counted host sync.
constexpr int kNative = 0, kMatmul = 1, kPython = 2, kCast = 3, kToCopy = 4, kScalar = 5;
std::atomic<uint64_t> g_host_syncs{0};
std::atomic<bool> g_any_wide{false};

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

std::mutex g_dec_mu;
std::unordered_map<Key, Decision, KeyHash> g_decisions;
std::unordered_map<const void*, OpInfo>& g_ops = *new std::unordered_map<const void*, OpInfo>();
py::object& g_dispatch = *new py::object();
py::object& g_decide = *new py::object();
py::object& g_resolve = *new py::object();
std::atomic<bool> g_fast{true};
std::atomic<uint64_t> g_fast_count{0}, g_slow_count{0};

OpInfo& op_info(const c10::OperatorHandle& op) {
  const void* k = &op.schema();
  auto it = g_ops.find(k);
  if (it != g_ops.end()) return it->second;
  OpInfo info;
  const auto& schema = op.schema();
  const auto& name = op.operator_name();
  info.func = g_resolve(name.name, name.overload_name);
  for (const auto& ret : schema.returns()) {
    int8_t w = -1, v = -1;
    const auto* ra = ret.alias_info();
    if (ra) {
      for (size_t i = 0; i < schema.arguments().size(); ++i) {
        const auto* aa = schema.arguments()[i].alias_info();
        if (aa && aa->beforeSets() == ra->beforeSets()) {
          if (ra->isWrite() && aa->isWrite()) w = static_cast<int8_t>(i);
          else if (!ra->isWrite()) v = static_cast<int8_t>(i);
          break;
        }
      }
    }
    info.write_alias.push_back(w);
    info.view_of.push_back(v);
    if (w >= 0) info.any_write = true;
  }
  info.ok = true;
  return g_ops.emplace(k, std::move(info)).first->second;
}

// The op's arguments as __torch_dispatch__ passes them: positional ones with trailing defaults dropped, kwarg-only
// ones not at their default (the rule of torch::impl::dispatch's parseIValuesToPyArgsKwargs,
// torch/csrc/autograd/python_variable.cpp in pytorch/pytorch, which is not exported to extensions).
std::pair<py::tuple, py::dict> to_py(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& arguments) {
  const auto& sargs = schema.arguments();
  auto is_default = [&](size_t i) {
    const auto& d = sargs[i].default_value();
    return d.has_value() && !(*d != arguments[i]);
  };
  size_t positional_end = 0;
  for (size_t i = 0; i < sargs.size(); ++i) {
    if (sargs[i].kwarg_only()) break;
    positional_end = i + 1;
  }
  // dtype, layout and memory_format travel as ints in an IValue: Python gets their torch objects (the same
  // schema-aware conversion as parseIValuesToPyArgsKwargs).
  auto to_obj = [&](size_t i) -> py::object {
    const auto& v = arguments[i];
    if (v.isNone()) return py::none();
    auto type = sargs[i].real_type();
    if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
    auto kind = type->kind();
    if (kind == c10::ScalarTypeType::Kind) {
      return py::reinterpret_borrow<py::object>(
          reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<c10::ScalarType>(v.toInt()))));
    }
    if (kind == c10::LayoutType::Kind) {
      return py::reinterpret_borrow<py::object>(
          reinterpret_cast<PyObject*>(torch::getTHPLayout(static_cast<c10::Layout>(v.toInt()))));
    }
    if (kind == c10::MemoryFormatType::Kind) {
      return py::reinterpret_borrow<py::object>(
          torch::utils::getTHPMemoryFormat(static_cast<c10::MemoryFormat>(v.toInt())));
    }
    return torch::jit::toPyObject(v);
  };
  size_t last = positional_end;
  while (last > 0 && is_default(last - 1)) --last;
  py::tuple args(last);
  for (size_t i = 0; i < last; ++i) args[i] = to_obj(i);
  py::dict kwargs;
  for (size_t i = positional_end; i < sargs.size(); ++i) {
    if (is_default(i)) continue;
    kwargs[py::str(sargs[i].name())] = to_obj(i);
  }
  return {std::move(args), std::move(kwargs)};
}

void push_py(const c10::FunctionSchema& schema, torch::jit::Stack* stack, const py::object& out) {
  const auto& rets = schema.returns();
  if (rets.size() == 0) return;
  if (rets.size() == 1) {
    stack->push_back(torch::jit::toIValue(out, rets[0].real_type()));
    return;
  }
  auto tup = out.cast<py::sequence>();
  TORCH_CHECK(tup.size() == rets.size(), "neuron dispatch: ", schema.name(), " returned ", tup.size(),
              " values, expected ", rets.size());
  for (size_t i = 0; i < rets.size(); ++i) stack->push_back(torch::jit::toIValue(tup[i], rets[i].real_type()));
}

// Every device tensor an op's schema says it writes (in place, out=, foreach lists) is marked written.
void touch_written(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& arguments) {
  const auto& sargs = schema.arguments();
  for (size_t i = 0; i < sargs.size() && i < arguments.size(); ++i) {
    const auto* a = sargs[i].alias_info();
    if (a == nullptr || !a->isWrite()) continue;
    const auto& v = arguments[i];
    if (v.isTensor()) {
      touch(v.toTensor());
    } else if (v.isTensorList() || v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) touch(e.toTensor());
      }
    }
  }
}

void slow_path(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  g_slow_count++;
  py::gil_scoped_acquire gil;
  OpInfo& info = op_info(op);
  const auto& schema = op.schema();
  auto arguments = torch::jit::pop(*stack, schema.arguments().size());
  auto [args, kwargs] = to_py(schema, arguments);
  py::object out = g_dispatch(info.func, args, kwargs);
  push_py(schema, stack, out);
  if (schema.is_mutable()) touch_written(schema, arguments);
}

// Collect (op, input dtypes, requested dtype) the way dispatch.py keys its decisions; false: not for the fast path
// (a host tensor with data, tensors on two cores, too many dtypes).
bool fast_key(const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t base, Key& key, int& core) {
  const auto& sargs = schema.arguments();
  uint64_t packed = 0;
  int n = 0;
  int requested = -1;
  core = -1;
  auto add = [&](const at::Tensor& t) -> bool {
    if (!t.defined()) return true;
    if (!is_dev(t)) return t.dim() == 0;  // 0-d host scalars are allowed and not keyed
    int c = t.device().index();
    if (core >= 0 && c != core) return false;
    core = c;
    if (n >= 8) return false;
    packed |= static_cast<uint64_t>(static_cast<uint8_t>(t.scalar_type())) << (8 * n);
    ++n;
    return true;
  };
  for (size_t i = 0; i < sargs.size(); ++i) {
    const auto& v = stack[base + i];
    if (v.isTensor()) {
      if (sargs[i].kwarg_only()) {
        const auto& d = sargs[i].default_value();
        if (d.has_value() && !(*d != v)) continue;
      }
      if (!add(v.toTensor())) return false;
    } else if (v.isTensorList()) {
      auto l = v.toTensorList();
      for (size_t j = 0; j < l.size(); ++j) {
        if (!add(l.get(j))) return false;
      }
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && !add(e.toTensor())) return false;
      }
    } else if (sargs[i].name() == "dtype" && sargs[i].kwarg_only() && v.isInt()) {
      requested = static_cast<int>(v.toInt());  // dispatch.py appends the requested dtype after the tensors'
    }
  }
  if (core < 0) return false;
  if (requested >= 0) {
    if (n >= 8) return false;
    packed |= static_cast<uint64_t>(static_cast<uint8_t>(requested)) << (8 * n);
    ++n;
  }
  key.dtypes = packed;
  key.n = n;
  return true;
}

py::list dtype_list(const Key& key) {
  py::list l;
  for (int i = 0; i < key.n; ++i) {
    auto st = static_cast<at::ScalarType>((key.dtypes >> (8 * i)) & 0xff);
    l.append(py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(st))));
  }
  return l;
}

// bf16-rounded copies of leaf operands (parameters), reused while the parameter is alive and unchanged (same version
// counter, same view): inference rounds each weight once instead of on every matmul. The values are what rounding the
// operand again gives; the copies are host temporaries, never device memory, as the per-call rounding's were.
struct Rounded {
  c10::weak_intrusive_ptr<c10::TensorImpl> owner;
  uint32_t version;
  uint64_t writes;
  const void* data;
  std::vector<int64_t> sizes, strides;
  at::Tensor value;
};
std::mutex g_round_mu;
std::unordered_map<const c10::TensorImpl*, Rounded> g_rounded;

at::Tensor round_bf16(const at::Tensor& host, const at::Tensor& dev) {
  if (!dev.defined() || !dev.is_leaf() || !dev.requires_grad()) return host.to(at::kBFloat16).to(at::kFloat);
  const c10::TensorImpl* key = dev.unsafeGetTensorImpl();
  uint32_t version = dev.unsafeGetTensorImpl()->version_counter().current_version();
  DevCtx* ctx = dev_ctx(dev.storage());
  if (ctx == nullptr) return host.to(at::kBFloat16).to(at::kFloat);
  uint64_t writes = ctx->writes.load();
  {
    std::lock_guard<std::mutex> lock(g_round_mu);
    auto it = g_rounded.find(key);
    if (it != g_rounded.end()) {
      const Rounded& r = it->second;
      if (!r.owner.expired() && r.version == version && r.writes == writes && r.data == dev.const_data_ptr() &&
          dev.sizes().equals(r.sizes) && dev.strides().equals(r.strides)) {
        return r.value;
      }
    }
  }
  at::Tensor value = host.to(at::kBFloat16).to(at::kFloat);
  std::lock_guard<std::mutex> lock(g_round_mu);
  if (g_rounded.size() > 4096) {
    for (auto it = g_rounded.begin(); it != g_rounded.end();) it = it->second.owner.expired() ? g_rounded.erase(it) : ++it;
  }
  g_rounded.insert_or_assign(key, Rounded{c10::weak_intrusive_ptr<c10::TensorImpl>(dev.getIntrusivePtr()), version, writes,
                                          dev.const_data_ptr(), dev.sizes().vec(), dev.strides().vec(), value});
  return value;
}

void run_fast(const c10::OperatorHandle& op, torch::jit::Stack* stack, const Decision& dec, int core) {
  const auto& schema = op.schema();
  size_t nargs = schema.arguments().size();
  size_t base = stack->size() - nargs;
  std::vector<c10::IValue> originals(stack->begin() + base, stack->end());
  std::vector<at::Tensor> hosts(nargs);
  for (size_t i = 0; i < nargs; ++i) {
    auto& v = (*stack)[base + i];
    if (v.isTensor()) {
      const auto& t = v.toTensor();
      if (is_dev(t)) {
        hosts[i] = host_alias(t);
        v = hosts[i];
      }
    } else if (v.isTensorList()) {
      auto l = v.toTensorList();
      c10::List<at::Tensor> nl;
      nl.reserve(l.size());
      for (size_t j = 0; j < l.size(); ++j) {
        at::Tensor t = l.get(j);
        nl.push_back(is_dev(t) ? host_alias(t) : t);
      }
      v = nl;
    } else if (v.isList()) {
      auto l = v.toList();
      bool any = false;
      for (size_t j = 0; j < l.size(); ++j) {
        c10::IValue e = l.get(j);
        any = any || (e.isTensor() && is_dev(e.toTensor()));
      }
      if (any) {
        c10::impl::GenericList nl(l.elementType());
        for (size_t j = 0; j < l.size(); ++j) {
          c10::IValue e = l.get(j);
          if (e.isTensor() && is_dev(e.toTensor())) nl.push_back(host_alias(e.toTensor()));
          else nl.push_back(e);
        }
        v = nl;
      }
    }
  }
  if (dec.kind == kMatmul) {
    for (int i : dec.operands) {
      if (i < static_cast<int>(nargs)) {
        auto& v = (*stack)[base + i];
        if (v.isTensor() && v.toTensor().scalar_type() == at::kFloat) {
          const auto& orig = originals[i];
          v = round_bf16(v.toTensor(), orig.isTensor() ? orig.toTensor() : at::Tensor());
        }
      }
    }
  }
  op.callBoxed(stack);
  if (schema.is_mutable()) touch_written(schema, originals);
  OpInfo& info = op_info(op);
  size_t nret = schema.returns().size();
  size_t rbase = stack->size() - nret;
  if (dec.kind == kCast) {
    int run = dec.operands.size() > 0 ? dec.operands[0] : 0;
    bool wraps = dec.operands.size() > 1 && dec.operands[1];
    auto wrap32 = [](const at::Tensor& t) {
      return t.defined() && t.scalar_type() == at::kLong && t.numel() ? t.to(at::kInt).to(at::kLong) : t;
    };
    for (size_t r = 0; r < nret; ++r) {
      auto& v = (*stack)[rbase + r];
      int w = r < info.write_alias.size() ? info.write_alias[r] : -1;
      if (run == 2 && w >= 0 && hosts[w].defined() && hosts[w].scalar_type() == at::kLong) {
        hosts[w].copy_(hosts[w].to(at::kInt));  // autocast.settle_written
      } else if (run == 0 && wraps) {
        if (v.isTensor()) {
          v = wrap32(v.toTensor());
        } else if (v.isTensorList()) {
          auto l = v.toTensorList();
          c10::List<at::Tensor> nl;
          for (size_t j = 0; j < l.size(); ++j) nl.push_back(wrap32(l.get(j)));
          v = nl;
        }
      }
    }
  }
  for (size_t r = 0; r < nret; ++r) {
    auto& v = (*stack)[rbase + r];
    int w = r < info.write_alias.size() ? info.write_alias[r] : -1;
    if (w >= 0 && originals[w].isTensor()) {
      const auto& d = originals[w].toTensor();
      if (is_dev(d)) {
        sync_from_host(d, hosts[w].defined() ? hosts[w] : d);
        touch(d);
      }
      v = originals[w];
      continue;
    }
    if (v.isTensor()) {
      const auto& t = v.toTensor();
      if (t.defined() && t.device().is_cpu()) v = adopt(t, core);
    } else if (v.isTensorList()) {
      auto l = v.toTensorList();
      c10::List<at::Tensor> nl;
      nl.reserve(l.size());
      for (size_t j = 0; j < l.size(); ++j) {
        at::Tensor t = l.get(j);
        nl.push_back(t.defined() && t.device().is_cpu() ? adopt(t, core) : t);
      }
      v = nl;
    }
  }
}

// Whether a device tensor is among the arguments (a meta or fake tensor may carry PrivateUse1 keys without one: Dynamo's
// FakeTensor is built over a meta tensor dispatching as its fake device).
bool has_device_tensor(const torch::jit::Stack& stack, size_t base, size_t n) {
  for (size_t i = base; i < base + n; ++i) {
    const auto& v = stack[i];
    if (v.isTensor()) {
      if (is_dev(v.toTensor())) return true;
    } else if (v.isTensorList() || v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && is_dev(e.toTensor())) return true;
      }
    }
  }
  return false;
}

// _to_copy(Tensor self, *, ScalarType? dtype, Layout? layout, Device? device, bool? pin_memory, bool non_blocking,
// MemoryFormat? memory_format): to the host, or a conversion on the device (a new device tensor on the target core).
void run_to_copy(const c10::OperatorHandle& op, torch::jit::Stack* stack, int core) {
  size_t base = stack->size() - op.schema().arguments().size();
  auto& self = (*stack)[base];
  auto& device = (*stack)[base + 3];
  self = host_alias(self.toTensor());
  if (!device.isNone() && device.toDevice().type() != kDev) {
    op.callBoxed(stack);  // device -> host: _to_copy always copies
    return;
  }
  int target = device.isNone() ? core : core_of_device(device.toDevice().index() >= 0 ? std::optional<at::Device>(
                                                                    device.toDevice())
                                                                                     : std::optional<at::Device>());
  if (!device.isNone() && device.toDevice().index() < 0) target = core;
  device = c10::IValue(c10::Device(c10::kCPU));
  op.callBoxed(stack);
  auto& out = stack->back();
  out = adopt(out.toTensor(), target);
}

void boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  {
    size_t n = op.schema().arguments().size();
    if (!has_device_tensor(*stack, stack->size() - n, n) && !op.hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
      // No device tensor: the op's composite kernel, which is also the CPU's entry (see cover()), as if the core had
      // not registered itself for the op (zeros_like(host, device="neuron"), detach of a fake tensor's meta data).
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
      return;
    }
  }
  if (g_fast.load(std::memory_order_relaxed)) {
    const auto& schema = op.schema();
    size_t base = stack->size() - schema.arguments().size();
    Key key{&schema, 0, 0};
    int core = -1;
    if (fast_key(schema, *stack, base, key, core)) {
      Decision dec;
      bool found = false;
      {
        std::lock_guard<std::mutex> lock(g_dec_mu);
        auto it = g_decisions.find(key);
        if (it != g_decisions.end()) {
          dec = it->second;
          found = true;
        }
      }
      if (!found) {
        py::gil_scoped_acquire gil;
        OpInfo& info = op_info(op);
        py::object r = g_decide(info.func, dtype_list(key));
        Decision d;
        auto tup = r.cast<py::tuple>();
        d.kind = tup[0].cast<int>();
        for (auto x : tup[1].cast<py::sequence>()) d.operands.push_back(x.cast<int>());
        dec = d;
        std::lock_guard<std::mutex> lock(g_dec_mu);
        g_decisions.emplace(key, std::move(d));
      }
      if (dec.kind == kToCopy) {
        g_fast_count++;
        run_to_copy(op, stack, core);
        return;
      }
      if (dec.kind == kScalar) {
        g_fast_count++;
        g_host_syncs++;
        auto& self = (*stack)[base];
        self = host_alias(self.toTensor());
        op.callBoxed(stack);
        return;
      }
      if (dec.kind == kNative || dec.kind == kMatmul || (dec.kind == kCast && !g_any_wide.load())) {
        g_fast_count++;
        run_fast(op, stack, dec, core);
        return;
      }
    }
  }
  slow_path(op, stack);
}

std::vector<std::unique_ptr<torch::Library>> g_libs;

// Route `names` ("ns::op.overload") on PrivateUse1 to the boxed kernel. Used for the ops that have a
// CompositeExplicitAutograd kernel, which would otherwise run for PrivateUse1 ahead of the backend fallback: the
// device decides on every op as the real backend's dispatcher sees it.
// ---------------------------------------------------------------------------------------------------------------
// attention.py's replay of the composite SDPA's math lowering, op for op as attention._lowering runs it (same ATen ops
// in the same order on the host data, bf16-rounded bmm operands where the device decides MATMUL, each new storage
// accounted as device memory while it lives). attention.py runs the Python lowering to vouch for a plan (recording
// the sequence); this runs an accepted plan without a Python call per op. An undefined result: a reshape would copy.
// ---------------------------------------------------------------------------------------------------------------
struct Replay {
  int core;
  bool round_bmm;
  at::Tensor acc(at::Tensor t) {
    account(t, core);
    return t;
  }
  at::Tensor full(c10::IntArrayRef size, const at::Scalar& value, at::ScalarType dtype) {
    int64_t n = c10::elementSize(dtype);
    for (auto d : size) n *= d;
    check_fits_or_throw(n, core);
    at::Tensor t = acc(at::empty(size, at::TensorOptions().dtype(dtype)));
    t.fill_(value);
    return t;
  }
  bool view(const at::Tensor& t, c10::IntArrayRef shape, at::Tensor& out) {
    if (t.is_contiguous()) {
      out = t.view(shape);
      return true;
    }
    auto strides = at::detail::computeStride(t.sizes(), t.strides(), shape);
    if (!strides.has_value()) return false;
    out = at::_reshape_alias(t, shape, *strides);
    return true;
  }
  at::Tensor bool_mask(const at::Tensor& mask, at::ScalarType dtype) {
    at::Tensor neg = full({}, -std::numeric_limits<double>::infinity(), dtype);
    at::Tensor zero = full({}, 0.0, dtype);
    return acc(at::where(mask, zero, neg));
  }
  bool matmul(const at::Tensor& a, const at::Tensor& b, at::Tensor& result) {
    std::vector<int64_t> batch(a.sizes().begin(), a.sizes().end() - 2);
    int64_t n = 1;
    for (auto d : batch) n *= d;
    at::Tensor a3, b3;
    if (!view(a.expand(a.sizes()), {n, a.size(-2), a.size(-1)}, a3)) return false;
    if (!view(b.expand(b.sizes()), {n, b.size(-2), b.size(-1)}, b3)) return false;
    at::Tensor out = round_bmm ? acc(at::bmm(a3.scalar_type() == at::kFloat ? a3.to(at::kBFloat16).to(at::kFloat) : a3,
                                             b3.scalar_type() == at::kFloat ? b3.to(at::kBFloat16).to(at::kFloat) : b3))
                               : acc(at::bmm(a3, b3));
    std::vector<int64_t> shape = batch;
    shape.push_back(a.size(-2));
    shape.push_back(b.size(-1));
    return view(out, shape, result);
  }
  bool repeat_kv(const at::Tensor& t, int64_t n, at::Tensor& out) {
    at::Tensor e = t.unsqueeze(2).expand({t.size(0), t.size(1), n, t.size(2), t.size(3)});
    at::Tensor c = acc(e.clone(at::MemoryFormat::Contiguous));
    return view(c, {t.size(0), t.size(1) * n, t.size(2), t.size(3)}, out);
  }
  void check_fits_or_throw(int64_t nbytes, int c) {
    int64_t block = block_size(nbytes);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    CoreMemory& mm = mem_of(c);
    auto it = mm.cached.find(block);
    if ((it != mm.cached.end() && it->second > 0) || mm.reserved + block <= g_capacity) return;
    TORCH_CHECK_WITH(OutOfMemoryError, mm.allocated + block <= g_capacity, "neuron:", c,
                     " out of memory: tried to allocate ", fmt_mib(block), "; NeuronCore ", c,
                     " has a total capacity of ", fmt_mib(g_capacity), ", of which ", fmt_mib(mm.allocated),
                     " is allocated and ", fmt_mib(g_capacity - mm.reserved),
                     " is free (the profile's HBM per chip / logical NeuronCores per chip sets the capacity; "
                     "NEURON_MEMORY_GB overrides it).");
  }
};

at::Tensor replay_sdpa(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                       const std::optional<at::Tensor>& mask_in, bool is_causal, std::optional<double> scale,
                       bool gqa, bool round_bmm, int core) {
  Replay run{core, round_bmm};
  at::Tensor k = k_in, v = v_in, mask;
  if (mask_in.has_value() && mask_in->defined()) {
    mask = mask_in->scalar_type() == at::kBool ? run.bool_mask(*mask_in, q_in.scalar_type()) : *mask_in;
  }
  double s = std::sqrt(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q_in.size(-1))));
  at::Tensor q = run.acc(at::mul(q_in, s));
  if (is_causal) {
    at::Tensor tri;
    {
      at::Tensor ones = run.full({q.size(-2), k.size(-2)}, 1.0, at::kBool);
      tri = run.acc(at::tril(ones));
    }
    mask = run.bool_mask(tri, q.scalar_type());
  }
  if (gqa) {
    int64_t n = q.size(1) / k.size(1);
    at::Tensor k2, v2;
    if (!run.repeat_kv(k, n, k2)) return at::Tensor();
    k = k2;
    if (!run.repeat_kv(v, n, v2)) return at::Tensor();
    v = v2;
  }
  at::Tensor attn;
  {
    at::Tensor kt = run.acc(at::mul(k.transpose(-2, -1), s));
    if (!run.matmul(q, kt, attn)) return at::Tensor();
  }
  if (mask.defined()) attn.add_(mask);
  at::Tensor probs;
  {
    at::Tensor out = run.acc(at::_softmax(attn, -1, false));
    at::Tensor masked = run.acc(at::eq(attn, -std::numeric_limits<double>::infinity()));
    at::Tensor rows = run.acc(at::all(masked, -1, true));
    at::Tensor zeros = run.acc(at::full_like(out, 0, std::nullopt, std::nullopt, std::nullopt, false,
                                             at::MemoryFormat::Preserve));
    probs = run.acc(at::where(rows, zeros, out));
  }
  attn = at::Tensor();
  at::Tensor result;
  if (!run.matmul(probs, v, result)) return at::Tensor();
  return result;
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

struct QuietHandler final : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

void cover(const std::vector<std::string>& names) {
  // Registering over c10d's PrivateUse1 kernels warns "Overriding a previously registered kernel": intended here.
  QuietHandler quiet;
  c10::WarningUtils::WarningHandlerGuard guard(&quiet);
  std::unordered_map<std::string, torch::Library*> by_ns;
  for (const auto& full : names) {
    auto sep = full.find("::");
    if (sep == std::string::npos) continue;
    std::string ns = full.substr(0, sep);
    auto it = by_ns.find(ns);
    if (it == by_ns.end()) {
      g_libs.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1,
                                                        "neuron_backend/csrc/core.cpp", __LINE__));
      it = by_ns.emplace(ns, g_libs.back().get()).first;
    }
    it->second->impl(full.substr(sep + 2).c_str(), torch::CppFunction::makeFromBoxedFunction<&boxed>());
  }
}

}  // namespace neuron

C10_REGISTER_GUARD_IMPL(PrivateUse1, neuron::NeuronGuard);
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &neuron::g_alloc);

// The allocating factories and set_ (which only rebinds a storage) are the core's own kernels. Views, resize_ and
// every other op go through the boxed kernel, so the device decides on them and records them as the wrapper
// subclass did (a view's result is a view of the device storage: adopt() recovers it from the host alias).
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

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron::boxed>());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace neuron;
  static NeuronHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
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
  m.def("check_fits", [](int64_t nbytes, int core) {
    // Raise torch.OutOfMemoryError if a request could not be reserved (without allocating).
    int64_t block = block_size(nbytes);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    CoreMemory& mm = mem_of(core);
    auto it = mm.cached.find(block);
    if ((it != mm.cached.end() && it->second > 0) || mm.reserved + block <= g_capacity) return;
    TORCH_CHECK_WITH(OutOfMemoryError, mm.allocated + block <= g_capacity, "neuron:", core,
                     " out of memory: tried to allocate ", fmt_mib(block), "; NeuronCore ", core,
                     " has a total capacity of ", fmt_mib(g_capacity), ", of which ", fmt_mib(mm.allocated),
                     " is allocated and ", fmt_mib(g_capacity - mm.reserved),
                     " is free (the profile's HBM per chip / logical NeuronCores per chip sets the capacity; "
                     "NEURON_MEMORY_GB overrides it).");
  });
  m.def("is_device", &is_dev, "Whether the tensor's memory is device memory (a fake neuron tensor's is not).");
  m.def("is_host", &is_real_host, "Whether the tensor is a host tensor with host memory.");
  m.def("is_alias", [](const at::Tensor& h) {
    return h.has_storage() && h.storage().data_ptr().get_deleter() == &alias_delete;
  });
}
