// attention.py's accepted SDPA replay in C++.
#include "neuron.h"

#include <ATen/ATen.h>

#include <ATen/TensorUtils.h>
#include <ATen/ops/_reshape_alias_native.h>

#include <cmath>
#include <limits>

namespace neuron {

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
    check_fits(n, core);
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

}  // namespace neuron
