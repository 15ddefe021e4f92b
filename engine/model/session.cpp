// The decoder with attention residuals (k3-model.md §2), chunk by chunk.
#include "engine/model/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/model/layers.h"
#include "engine/ops/kernels.h"

namespace nj {

using Clock = std::chrono::steady_clock;

namespace {

// The index of the first NaN or infinity in `v`, or v.size().
size_t first_non_finite(const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return i;
  return v.size();
}

}  // namespace

void attn_res(const std::vector<const float*>& sources, const float* w, int T, int hidden, float eps, float* out) {
  const size_t hs = static_cast<size_t>(hidden), n = sources.size();
  std::vector<float> p(n);
  for (int t = 0; t < T; ++t) {
    const size_t off = static_cast<size_t>(t) * hs;
    for (size_t j = 0; j < n; ++j) {
      const float* v = sources[j] + off;
      const float inv_rms = 1.0f / std::sqrt(ops::dot(v, v, hidden) / static_cast<float>(hidden) + eps);
      p[j] = ops::dot(v, w, hidden) * inv_rms;
    }
    ops::softmax_inplace(p.data(), static_cast<int>(n));
    float* o = out + off;
    for (int i = 0; i < hidden; ++i) o[i] = 0.0f;
    for (size_t j = 0; j < n; ++j) ops::axpy(p[j], sources[j] + off, o, hidden);  // the RAW sources
  }
}

struct Session::Workspace {
  Scratch layer;            // attention and FFN buffers
  std::vector<float> h;     // [T][hidden] the stream entering attn_res
  std::vector<float> prefix;// [T][hidden] the running sum since the last block boundary
  std::vector<float> blocks;// [max_blocks][T][hidden] snapshots of the layer inputs
  std::vector<float> xn;    // [T][hidden] normed input to attention / FFN
  std::vector<float> a;     // [T][hidden] attention or FFN output
  std::vector<float> tmp;   // [T][hidden]
  std::vector<float> logits;// [rows][vocab]
};

uint64_t estimate_session_scratch_bytes(const ModelConfig& c, int chunk, int max_context, bool all_logits) {
  const uint64_t T = static_cast<uint64_t>(chunk), hid = static_cast<uint64_t>(c.hidden);
  const uint64_t P = static_cast<uint64_t>(c.kda_width()), H = static_cast<uint64_t>(c.kda_heads),
                 D = static_cast<uint64_t>(c.kda_head_dim), K = static_cast<uint64_t>(c.conv_kernel);
  const uint64_t nh = static_cast<uint64_t>(c.heads), kvl = static_cast<uint64_t>(c.kv_lora_rank),
                 rope = static_cast<uint64_t>(c.qk_rope), qk = static_cast<uint64_t>(c.qk_nope + c.qk_rope),
                 vd = static_cast<uint64_t>(c.v_head_dim);
  const uint64_t E = static_cast<uint64_t>(c.num_experts), k = static_cast<uint64_t>(c.top_k),
                 lat = static_cast<uint64_t>(c.latent), mi = static_cast<uint64_t>(c.moe_inter);
  const uint64_t blocks = static_cast<uint64_t>((c.layers - 1) / c.attn_res_block_size + 1);
  const uint64_t inter = std::max<uint64_t>(static_cast<uint64_t>(c.dense_inter), static_cast<uint64_t>(c.shared_inter()));
  uint64_t floats = (5 + blocks) * T * hid + (all_logits ? T : 1) * static_cast<uint64_t>(c.vocab);
  floats += 7 * T * P + T * H + T * D + (T + K - 1) * P + 2 * H * D;                      // KDA
  floats += T * (static_cast<uint64_t>(c.q_lora_rank) + nh * qk + kvl + rope + 2 * nh * vd) +
            nh * (2 * kvl + static_cast<uint64_t>(max_context));                            // MLA
  floats += T * (E + 2 * k + lat) + 4 * T * k * lat + 2 * T * k * mi + T * hid + 2 * T * inter;  // MoE, FFN
  floats += T * std::max({hid, P, inter, lat, mi, kvl});                                     // arranged activations
  return floats * sizeof(float);
}

Session::Session(Model& model, SessionOptions options)
    : model_(model), options_(options), state_(SequenceState::empty(model.config())),
      ws_(std::make_unique<Workspace>()) {
  if (options_.prefill_chunk < 1) options_.prefill_chunk = 1;
  if (options_.record_routing) routing_ = RoutingProfile(model.config().layers, model.config().num_experts);
}

Session::~Session() = default;

Status Session::feed(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  const size_t vocab = static_cast<size_t>(model_.config().vocab);
  if (all_logits) all_logits->assign(ids.size() * vocab, 0.0f);
  for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(options_.prefill_chunk)) {
    const size_t n = std::min(ids.size() - i, static_cast<size_t>(options_.prefill_chunk));
    float* dst = all_logits ? all_logits->data() + i * vocab : nullptr;
    NJ_RETURN_IF_ERROR(forward_chunk(ids.subspan(i, n), dst, all_logits != nullptr));
  }
  return Status();
}

Status Session::forward_chunk(std::span<const int32_t> ids, float* logits_out, bool all_positions) {
  const ModelConfig& c = model_.config();
  WeightSource& src = model_.weights();
  Workspace& ws = *ws_;
  const int T = static_cast<int>(ids.size());
  const size_t hs = static_cast<size_t>(c.hidden), th = static_cast<size_t>(T) * hs;
  const int max_blocks = (c.layers - 1) / c.attn_res_block_size + 1;
  for (auto* v : {&ws.h, &ws.prefix, &ws.xn, &ws.a, &ws.tmp}) v->resize(th);
  ws.blocks.resize(static_cast<size_t>(max_blocks) * th);
  const auto t_start = Clock::now();
  double wait = 0;
  auto timed = [&](auto&& fn) {
    auto t0 = Clock::now();
    auto r = fn();
    wait += std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  };

  // h = embed_tokens[id]
  NJ_RETURN_IF_ERROR(timed([&] { return src.embed(ids, ws.h.data()); }));
  int nblocks = 0;
  auto block = [&](int j) { return ws.blocks.data() + static_cast<size_t>(j) * th; };
  std::vector<const float*> sources;
  auto with_blocks = [&](const float* last) {
    sources.clear();
    for (int j = 0; j < nblocks; ++j) sources.push_back(block(j));
    sources.push_back(last);
    return sources;
  };

  src.will_need_layer(0);
  MoeCounters moe;
  for (int l = 0; l < c.layers; ++l) {
    auto got = timed([&] { return src.layer(l); });
    if (!got.ok()) return got.status();
    const LayerWeights& w = **got;
    if (l + 1 < c.layers) src.will_need_layer(l + 1);
    LayerState& st = state_.layers[static_cast<size_t>(l)];

    // prefix = h; with a bank, h = attn_res(blocks + [prefix])
    std::copy_n(ws.h.data(), th, ws.prefix.data());
    bool prefix_none = false;
    if (nblocks > 0) attn_res(with_blocks(ws.prefix.data()), w.attn_res, T, c.hidden, c.rms_eps, ws.h.data());
    // every attn_res_block_size layers the raw layer input is banked and the sum restarts
    if (l % c.attn_res_block_size == 0) {
      std::copy_n(ws.prefix.data(), th, block(nblocks++));
      prefix_none = true;
    }
    // a = Attention(RMSNorm(h, input_layernorm))
    for (int t = 0; t < T; ++t) ops::rmsnorm(&ws.h[t * hs], w.input_norm, c.hidden, c.rms_eps, &ws.xn[t * hs]);
    if (w.is_mla) mla_forward(c, w.mla, st, ws.xn.data(), T, ws.a.data(), ws.layer);
    else kda_forward(c, w.kda, st, ws.xn.data(), T, ws.a.data(), ws.layer);
    if (prefix_none) std::copy_n(ws.a.data(), th, ws.prefix.data());
    else for (size_t i = 0; i < th; ++i) ws.prefix[i] = ws.prefix[i] + ws.a[i];
    // h = attn_res(blocks + [prefix]) (also with a single bank entry)
    attn_res(with_blocks(ws.prefix.data()), w.mlp_res, T, c.hidden, c.rms_eps, ws.h.data());
    // m = FFN(RMSNorm(h, post_attention_layernorm)); prefix += m; h = prefix
    for (int t = 0; t < T; ++t) ops::rmsnorm(&ws.h[t * hs], w.post_norm, c.hidden, c.rms_eps, &ws.xn[t * hs]);
    if (w.is_dense) {
      ffn_forward(c, w.dense, ws.xn.data(), T, ws.a.data(), ws.layer);
    } else {
      NJ_RETURN_IF_ERROR(moe_forward(c, l, w.moe, src, ws.xn.data(), T, ws.a.data(), ws.layer, &moe,
                                     options_.record_routing ? &routing_ : nullptr));
    }
    for (size_t i = 0; i < th; ++i) ws.prefix[i] = ws.prefix[i] + ws.a[i];
    std::copy_n(ws.prefix.data(), th, ws.h.data());
  }

  // h = attn_res(blocks + [h]); logits = lm_head(RMSNorm(h, norm)) for the requested rows
  auto head = timed([&] { return src.head(); });
  if (!head.ok()) return head.status();
  const HeadWeights& hw = **head;
  attn_res(with_blocks(ws.h.data()), hw.out_res, T, c.hidden, c.rms_eps, ws.tmp.data());
  const int first = all_positions ? 0 : T - 1, rows = T - first;
  for (int t = first; t < T; ++t)
    ops::rmsnorm(&ws.tmp[t * hs], hw.norm, c.hidden, c.rms_eps, &ws.xn[(t - first) * hs]);
  const size_t vocab = static_cast<size_t>(c.vocab);
  ws.logits.resize(static_cast<size_t>(rows) * vocab);
  ops::matmul(hw.lm_head, ws.xn.data(), rows, hs, ws.logits.data(), vocab);
  src.end_step();
  // NaN or infinity here (weights or a config value out of range) would be sampled as
  // garbage all night; the scan costs nothing next to the pass.
  if (const size_t bad = first_non_finite(ws.logits); bad < ws.logits.size())
    return non_finite("non-finite logits at position " +
                      std::to_string(state_.position + first + static_cast<int64_t>(bad / vocab)));

  if (logits_out) std::copy(ws.logits.begin(), ws.logits.end(), logits_out);
  state_.last_logits.assign(ws.logits.end() - static_cast<long>(vocab), ws.logits.end());
  state_.tokens.insert(state_.tokens.end(), ids.begin(), ids.end());
  state_.position += T;

  const double total = std::chrono::duration<double>(Clock::now() - t_start).count();
  wait += moe.wait_s;
  stats_.tokens += static_cast<uint64_t>(T);
  if (options_.record_routing && T == 1) routing_.add_tokens(1);
  stats_.passes += 1;
  stats_.wait_s += wait;
  stats_.compute_s += total - wait;
  stats_.expert_computations += moe.expert_computations;
  return Status();
}

}  // namespace nj
