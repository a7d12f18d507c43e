// The device guard and PrivateUse1 hooks: a C++ guard, so no Python runs in the guard's noexcept paths and the
// autograd engine knows every core (torch_openreg's OpenRegGuardImpl; the real backend registers NeuronGuardImpl).
#include "neuron.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>

namespace neuron {

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

void install_hooks() {
  static NeuronHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
}

}  // namespace neuron

C10_REGISTER_GUARD_IMPL(PrivateUse1, neuron::NeuronGuard);
