// The device's allocator (torch_openreg's OpenRegDeviceAllocator) with the memory model of neuron_backend/memory.py:
// per core allocated/reserved bytes and their peaks; a request is rounded to a block (power of two >= 256 B below
// 16 MB, exact above); a freed block stays reserved in a per-size cache and is reused by a request of the same block
// size; on a request that does not fit, the cache is released and the request retried before torch.OutOfMemoryError.
#include "neuron.h"

#include <c10/core/CPUAllocator.h>

#include <cstdio>
#include <cstring>

namespace neuron {

constexpr int64_t kMB = 1 << 20;
constexpr int64_t kRoundLimit = 16 * kMB;
constexpr int64_t kMinBlock = 256;

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

// torch.OutOfMemoryError (c10::OutOfMemoryError) with the figures a CUDA OOM message gives.
[[noreturn]] void throw_oom(const CoreMemory& m, int64_t block, int core) {
  TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron:", core, " out of memory: tried to allocate ", fmt_mib(block),
                   "; NeuronCore ", core, " has a total capacity of ", fmt_mib(g_capacity), ", of which ",
                   fmt_mib(m.allocated), " is allocated and ", fmt_mib(g_capacity - m.reserved),
                   " is free (the profile's HBM per chip / logical NeuronCores per chip sets the capacity; "
                   "NEURON_MEMORY_GB overrides it).");
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
      if (m.reserved + block > g_capacity) throw_oom(m, block, core);
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

void check_fits(int64_t nbytes, int core) {
  int64_t block = block_size(nbytes);
  std::lock_guard<std::mutex> lock(g_mem_mu);
  CoreMemory& m = mem_of(core);
  auto it = m.cached.find(block);
  if ((it != m.cached.end() && it->second > 0) || m.reserved + block <= g_capacity) return;
  if (m.allocated + block > g_capacity) throw_oom(m, block, core);
}

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

void charge(DevCtx* ctx, int64_t n) {
  ctx->block = block_size(n);
  std::lock_guard<std::mutex> lock(g_mem_mu);
  try {
    take(ctx->block, ctx->core);
  } catch (...) {
    delete ctx;  // nothing was taken: the context dies with the failed allocation
    throw;
  }
}

thread_local int tl_core_for_alloc = -1;
std::atomic<int> g_current{0};

c10::DataPtr NeuronAllocator::allocate_on(size_t n, int core) const {
  auto* ctx = new DevCtx();
  ctx->core = core;
  if (n) {
    charge(ctx, static_cast<int64_t>(n));
    ctx->owned = c10::GetCPUAllocator()->allocate(n);
    ctx->ptr = ctx->owned.get();
  }
  return {ctx->ptr, ctx, &dev_delete, c10::Device(kDev, static_cast<c10::DeviceIndex>(core))};
}

c10::DataPtr NeuronAllocator::allocate(size_t n) {
  return allocate_on(n, tl_core_for_alloc >= 0 ? tl_core_for_alloc : g_current.load());
}

void NeuronAllocator::copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }

NeuronAllocator g_alloc;

}  // namespace neuron

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &neuron::g_alloc);
