// The boxed kernel registered for every op on PrivateUse1: a decision cache per (op, input dtypes, requested dtype),
// filled from the Python policy (dispatch.fast_decision) the first time a key is seen; the fast path's decisions run
// in host_kernels.cpp, every other one in Python (dispatch.dispatch) through the slow path here.
#include "neuron_py.h"

#include <ATen/ATen.h>

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/library.h>

namespace neuron {

std::atomic<uint64_t> g_host_syncs{0};
std::atomic<bool> g_any_wide{false};
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
                                                        "neuron_backend/csrc/decisions.cpp", __LINE__));
      it = by_ns.emplace(ns, g_libs.back().get()).first;
    }
    it->second->impl(full.substr(sep + 2).c_str(), torch::CppFunction::makeFromBoxedFunction<&boxed>());
  }
}

}  // namespace neuron

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron::boxed>());
}
