// Host aliases and adoption: host kernels run on device memory through a CPU tensor over the device storage (same
// bytes, same view), and a host kernel's fresh result becomes device memory without a copy (adopted, accounted).
#include "neuron.h"

#include <c10/core/CPUAllocator.h>

namespace neuron {

std::mutex g_adopt_mu;
// host StorageImpl -> the device storage adopted over it (so a host storage adopted twice is counted once, as a
// view of a storage memory.py already counted added nothing).
std::unordered_map<c10::StorageImpl*, c10::weak_intrusive_ptr<c10::StorageImpl>> g_adopted;

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
    charge(ctx, n);
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

bool is_alias(const at::Tensor& h) {
  return h.has_storage() && h.storage().data_ptr().get_deleter() == &alias_delete;
}

}  // namespace neuron
