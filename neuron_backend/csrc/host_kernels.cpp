// The fast path: NATIVE, MATMUL (bf16 operand rounding), int64-as-int32 and _to_copy decisions run here, the host
// kernel on host aliases of the device memory; written arguments get the metadata their aliases now have, fresh
// results are adopted as device memory.
#include "neuron_py.h"

#include <ATen/ATen.h>

namespace neuron {

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

// A tensor list with each element passed through f (device <-> host aliases of the same memory).
template <class F>
c10::List<at::Tensor> map_list(const c10::List<at::Tensor>& l, F f) {
  c10::List<at::Tensor> out;
  out.reserve(l.size());
  for (size_t j = 0; j < l.size(); ++j) out.push_back(f(l.get(j)));
  return out;
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
      v = map_list(v.toTensorList(), [](const at::Tensor& t) { return is_dev(t) ? host_alias(t) : t; });
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
      v = map_list(v.toTensorList(),
                   [core](const at::Tensor& t) { return t.defined() && t.device().is_cpu() ? adopt(t, core) : t; });
    }
  }
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

}  // namespace neuron
