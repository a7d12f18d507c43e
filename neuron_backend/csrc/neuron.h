// The simulated NeuronCore device in C++, in the manner of PyTorch's torch_openreg
// (pytorch/pytorch test/cpp_extensions/open_registration_extension/torch_openreg: csrc/runtime/OpenRegDeviceAllocator.cpp,
// OpenRegGuard.h, csrc/aten/OpenRegMinimal.cpp): a PrivateUse1 allocator with the memory model of the device, a
// device guard, the empty/set_ kernels, and one boxed kernel for every other op with a decision cache per
// (op, input dtypes, requested dtype). Decisions come from the Python policy (neuron_backend/hardware, policy.py) the
// first time a key is seen; NATIVE and MATMUL (bf16 operand rounding) then run here on host aliases of the device
// memory, every other decision (CPU fallback, 64-bit/complex autocast, decompositions, typed errors, transfers,
// collectives) in neuron_backend/dispatch.py.
//
// Memory: device storage is host memory. A fresh result of a host kernel is adopted as device memory without a copy
// (the device DataPtr's context owns the host storage); a host alias of a device tensor (at::from_blob-like, over
// the whole device storage, same offset) lets host kernels read and write device memory in place.
//
// The translation units: allocator.cpp (memory model, allocator), storage.cpp (host aliases, adoption, accounting),
// guard.cpp (device guard, PrivateUse1 hooks), kernels.cpp (empty/set_/linear), decisions.cpp (the boxed kernel, its
// decision cache and the Python slow path), host_kernels.cpp (the fast path on host aliases), replay.cpp (the SDPA
// replay), module.cpp (the Python module). This header declares what they share; neuron_py.h, what the units that
// call into Python share.
#pragma once

// Light includes only (no Python, no dispatcher: neuron_py.h adds them where needed); each translation unit adds the
// heavy ones it uses (torch/extension.h alone costs ~30 s of compile, pybind11 ~7 s), so the split costs little build
// time.
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace neuron {

constexpr auto kDev = c10::DeviceType::PrivateUse1;

// --- allocator.cpp: the memory model (neuron_backend/memory.py documents the sources) ---------------------------
struct CoreMemory {
  int64_t allocated = 0, reserved = 0, peak = 0, peak_reserved = 0;
  std::unordered_map<int64_t, int64_t> cached;  // block bytes -> cached blocks of that size
};

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

struct NeuronAllocator final : c10::Allocator {
  c10::DataPtr allocate_on(size_t n, int core) const;
  c10::DataPtr allocate(size_t n) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const final;
};

extern std::mutex g_mem_mu;
extern std::vector<CoreMemory> g_mem;
extern int64_t g_capacity;
extern std::atomic<bool> g_ever_reserved;
extern std::atomic<int> g_cores;
extern std::atomic<int> g_current;
extern thread_local int tl_core_for_alloc;
extern NeuronAllocator g_alloc;

int64_t block_size(int64_t n);
CoreMemory& mem_of(int core);                // the lock held
void release_cache(CoreMemory& m);           // the lock held
void take(int64_t block, int core);          // the lock held; throws torch.OutOfMemoryError
void charge(DevCtx* ctx, int64_t n);        // ctx->block for n bytes taken on ctx->core; deletes ctx and rethrows on OOM
void give(int64_t block, int core);
void check_fits(int64_t nbytes, int core);   // throws torch.OutOfMemoryError if a request could not be reserved
void dev_delete(void* p);

// --- storage.cpp: host aliases of device memory, adoption of host results, accounting ------------------------------
extern std::mutex g_adopt_mu;
extern std::unordered_map<c10::StorageImpl*, c10::weak_intrusive_ptr<c10::StorageImpl>> g_adopted;

DevCtx* dev_ctx(const c10::Storage& st);
bool is_alias(const at::Tensor& h);
void touch(const at::Tensor& t);
bool is_dev(const at::Tensor& t);
bool is_real_host(const at::Tensor& t);
c10::DispatchKeySet dev_keys();
at::Tensor host_alias(const at::Tensor& t);
void account(const at::Tensor& h, int core);
at::Tensor adopt(const at::Tensor& h, int core);
void sync_from_host(const at::Tensor& d, const at::Tensor& h);

// --- guard.cpp -------------------------------------------------------------------------------------------------------
void install_hooks();

// --- kernels.cpp -----------------------------------------------------------------------------------------------------
int core_of_device(std::optional<at::Device> device);

// --- replay.cpp ------------------------------------------------------------------------------------------------------
at::Tensor replay_sdpa(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                       const std::optional<at::Tensor>& mask_in, bool is_causal, std::optional<double> scale,
                       bool gqa, bool round_bmm, int core);

}  // namespace neuron
