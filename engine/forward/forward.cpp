// The decoder with attention residuals (k3-model.md §2), one pass over a batch's rows.
#include "engine/forward/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <unordered_set>

#include "engine/forward/decoder_layer.h"
#include "engine/forward/layers.h"
#include "engine/moe/ffn.h"
#include "engine/moe/moe_layer.h"
#include "engine/ops/kernels.h"

namespace nj {

using Clock = std::chrono::steady_clock;

void SequenceUsage::add(const SequenceUsage& o) {
  tokens += o.tokens;
  passes += o.passes;
  max_batch = std::max(max_batch, o.max_batch);
  compute_s += o.compute_s;
  wait_s += o.wait_s;
  bytes_read += o.bytes_read;
  trunk_bytes_read += o.trunk_bytes_read;
  expert_bytes_read += o.expert_bytes_read;
}

Status feed_in_chunks(SequenceState& state, std::span<const int32_t> ids, int chunk, int vocab,
                      std::vector<float>* all_logits, SequenceUsage* usage,
                      const std::function<Status(SeqStep&)>& run) {
  const size_t n_vocab = static_cast<size_t>(vocab);
  const size_t n_chunk = static_cast<size_t>(std::max(1, chunk));
  if (all_logits) all_logits->assign(ids.size() * n_vocab, 0.0f);
  for (size_t i = 0; i < ids.size(); i += n_chunk) {
    const size_t n = std::min(ids.size() - i, n_chunk);
    const bool final_chunk = i + n == ids.size();
    SeqStep step;
    step.state = &state;
    step.ids = ids.subspan(i, n);
    step.logits = all_logits    ? LogitsWanted::kAll
                  : final_chunk ? LogitsWanted::kLast
                                : LogitsWanted::kNone;
    step.all_logits = all_logits ? all_logits->data() + i * n_vocab : nullptr;
    step.usage = usage;
    NJ_RETURN_IF_ERROR(run(step));
  }
  return Status();
}

namespace {

// NonFinite naming the first position whose logits hold a NaN or an infinity, else OK.
// `logits` holds the rows `steps` asked for, in order (LogitsWanted), [rows][vocab].
Status check_finite(std::span<const SeqStep> steps, const float* logits, size_t vocab) {
  const float* row = logits;
  for (const SeqStep& s : steps) {
    const int64_t n = static_cast<int64_t>(s.ids.size());
    const int64_t first = s.logits == LogitsWanted::kAll    ? 0
                          : s.logits == LogitsWanted::kLast ? n - 1
                                                            : n;
    for (int64_t t = first; t < n; ++t, row += vocab)
      for (size_t v = 0; v < vocab; ++v)
        if (!std::isfinite(row[v]))
          return non_finite("non-finite logits at position " +
                            std::to_string(s.state->position + t));
  }
  return Status();
}

}  // namespace

Forward::Forward(const ModelConfig& config, WeightSource& weights, ForwardOptions options)
    : config_(config), weights_(weights), options_(options) {
  const ModelConfig& c = config;
  if (options_.record_routing) routing_ = RoutingProfile(c.layers, c.num_experts);
}

Forward::~Forward() = default;

// The MLA caches and token list grow by a pass's rows. Within the planned context they are
// reserved once for the whole of it (what the planner counted); past it they grow
// geometrically (amortized O(1) per token).
void Forward::reserve_context(const ModelConfig& c, SequenceState& st, int64_t needed) const {
  if (static_cast<int64_t>(st.tokens.capacity()) >= needed) return;
  const int64_t planned = options_.max_context;
  const int64_t target =
      needed <= planned ? planned : std::max<int64_t>(needed, 2 * static_cast<int64_t>(st.tokens.capacity()));
  const size_t n = static_cast<size_t>(target);
  st.tokens.reserve(n);
  for (int l = 0; l < c.layers; ++l) {
    if (c.attention[static_cast<size_t>(l)] != AttentionKind::kMla) continue;
    LayerState& ls = st.layers[static_cast<size_t>(l)];
    ls.latent.reserve(n * static_cast<size_t>(c.kv_lora_rank));
    ls.rope.reserve(n * static_cast<size_t>(c.qk_rope));
  }
}

Status Forward::validate(std::span<SeqStep> steps) const {
  const ModelConfig& c = config_;
  if (steps.empty()) return invalid_argument("a pass needs at least one sequence");
  std::unordered_set<const SequenceState*> seen;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SeqStep& s = steps[i];
    const std::string which = "sequence " + std::to_string(i) + " of the pass";
    if (!s.state) return invalid_argument(which + " has no state");
    if (s.ids.empty()) return invalid_argument(which + " has no tokens");
    if (s.state->layers.size() != static_cast<size_t>(c.layers))
      return invalid_argument(which + ": its state is shaped for another model");
    if (!seen.insert(s.state).second) return invalid_argument(which + ": its state is already in the pass");
    if (s.tentative && s.logits != LogitsWanted::kAll)
      return invalid_argument(which + " is tentative but does not ask for every position's logits");
    if (s.logits == LogitsWanted::kAll && !s.all_logits)
      return invalid_argument(which + " asks for every position's logits but gives no destination");
    for (int32_t id : s.ids)
      if (id < 0 || id >= c.vocab)
        return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                std::to_string(c.vocab - 1) + ")");
  }
  return Status();
}

Status Forward::run(std::span<SeqStep> steps) {
  if (!unsettled_.empty())
    return failed_precondition("a tentative step of the previous pass is not settled (Forward::keep)");
  NJ_RETURN_IF_ERROR(validate(steps));
  const ModelConfig& c = config_;
  WeightSource& src = weights_;
  const auto t_start = Clock::now();
  const WeightStats before = src.stats();

  // The pass's rows: step i owns [row0_i, row0_i + n_i).
  const int S = static_cast<int>(steps.size());
  std::vector<int> row0(steps.size());
  std::vector<int> slot(steps.size(), -1);  // index among the tentative steps
  int R = 0, logit_rows = 0, context = 1, tentative = 0, tentative_rows = 0;
  bool decode_only = true;
  ids_.clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    const SeqStep& s = steps[i];
    if (s.tentative) {
      slot[i] = tentative++;
      tentative_rows = std::max(tentative_rows, static_cast<int>(s.ids.size()));
    }
    row0[i] = R;
    R += static_cast<int>(s.ids.size());
    ids_.insert(ids_.end(), s.ids.begin(), s.ids.end());
    logit_rows += s.logits == LogitsWanted::kAll ? static_cast<int>(s.ids.size()) : s.logits == LogitsWanted::kLast;
    context = std::max<int64_t>(context, s.state->position + static_cast<int64_t>(s.ids.size()));
    decode_only = decode_only && s.ids.size() == 1;
  }
  // The planned buffers at the first pass (a Forward whose model only sweeps never needs them),
  // grown past the plan only when a pass asks for more.
  if (!acts_allocated_) {
    const int planned_tentative_rows = std::max(0, options_.tentative_rows);
    acts_.allocate(
        c,
        ActivationShape{std::max(1, options_.max_rows), std::max(1, options_.max_sequences),
                        std::max(1, options_.max_context), 1,
                        planned_tentative_rows > 0 ? std::max(1, options_.tentative_sequences) : 0,
                        planned_tentative_rows, options_.kda_rollback});
    acts_allocated_ = true;
  }
  acts_.ensure(c, ActivationShape{R, S, context, std::max(1, logit_rows), tentative, tentative_rows,
                                  options_.kda_rollback});
  for (const SeqStep& s : steps) reserve_context(c, *s.state, s.state->position + static_cast<int64_t>(s.ids.size()));
  StreamActivations& a = acts_.stream;
  const size_t hs = static_cast<size_t>(c.hidden), th = static_cast<size_t>(R) * hs;
  double wait = 0;
  auto timed = [&](auto&& fn) {
    auto t0 = Clock::now();
    auto r = fn();
    wait += std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  };

  // h = embed_tokens[id]
  NJ_RETURN_IF_ERROR(timed([&] { return src.embed(ids_, a.h.data()); }));
  const StreamRows rows{R, a.h.data(), a.prefix.data(), a.blocks.data(), th, a.xn.data(), a.a.data(), a.mix.data()};
  layer_rows_.resize(steps.size());
  last_ = PassStats{};
  last_.distinct_experts.assign(static_cast<size_t>(c.layers), 0);

  src.will_need_layer(0);
  MoeCounters moe;
  int kda_layer = 0;  // index among the KDA layers (the rollback log's)
  for (int l = 0; l < c.layers; ++l) {
    auto got = timed([&] { return src.layer(l); });
    if (!got.ok()) return got.status();
    const LayerWeights& w = **got;
    if (l + 1 < c.layers) src.will_need_layer(l + 1);
    for (size_t i = 0; i < steps.size(); ++i)
      layer_rows_[i] = SeqRows{&steps[i].state->layers[static_cast<size_t>(l)], row0[i],
                               static_cast<int>(steps[i].ids.size()), slot[i]};
    attention_half(c, l, w, rows, layer_rows_, acts_, kda_layer);
    if (!w.is_mla) ++kda_layer;
    // a = FFN(xn), dense or MoE; prefix += a; h = prefix
    if (w.is_dense) {
      ffn_forward(c, w.dense, a.xn.data(), R, a.a.data(), acts_.ffn);
    } else {
      NJ_RETURN_IF_ERROR(moe_forward(c, l, w.moe, src, a.xn.data(), R, a.a.data(), acts_.moe, acts_.ffn, &moe,
                                     options_.record_routing ? &routing_ : nullptr, decode_only));
      last_.distinct_experts[static_cast<size_t>(l)] = moe.distinct_experts;
      stats_.distinct_experts += static_cast<uint64_t>(moe.distinct_experts);
      stats_.moe_layer_passes += 1;
    }
    finish_layer(c, rows);
  }

  // h = attn_res(blocks + [h]); logits = lm_head(RMSNorm(h, norm)) for the wanted rows, a
  // part of lm_head's rows at a time when the head is streamed in parts
  std::vector<int> wanted;
  for (size_t i = 0; i < steps.size(); ++i) {
    const int n = static_cast<int>(steps[i].ids.size());
    const int first = steps[i].logits == LogitsWanted::kAll ? 0 : steps[i].logits == LogitsWanted::kLast ? n - 1 : n;
    for (int t = row0[i] + first; t < row0[i] + n; ++t) wanted.push_back(t);
  }
  const int lr = static_cast<int>(wanted.size());
  const size_t vocab = static_cast<size_t>(c.vocab);
  for (int part = 0; part < src.head_parts(); ++part) {
    auto head = timed([&] { return src.head(part); });
    if (!head.ok()) return head.status();
    const HeadWeights& hw = **head;
    if (part == 0) head_input(c, hw, rows, wanted, a.tmp.data(), a.head_in.data());
    ops::matmul(hw.lm_head, a.head_in.data(), lr, hs, a.logits.data() + hw.first_row, vocab);
  }
  src.end_step();
  // NaN or infinity (weights or a config value out of range) would be sampled as garbage all
  // night; the scan costs nothing next to the pass. Before any state moves.
  NJ_RETURN_IF_ERROR(check_finite(steps, a.logits.data(), vocab));

  int lr_done = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    SeqStep& s = steps[i];
    const size_t n = s.ids.size();
    SequenceState& st = *s.state;
    if (s.tentative)
      unsettled_.push_back(Unsettled{&st, slot[i], st.position, static_cast<int>(n), static_cast<size_t>(lr_done)});
    if (s.logits == LogitsWanted::kNone) {
      st.last_logits.clear();
    } else {
      const float* out = a.logits.data() + static_cast<size_t>(lr_done) * vocab;
      const size_t count = s.logits == LogitsWanted::kAll ? n : 1;
      if (s.logits == LogitsWanted::kAll) std::copy_n(out, n * vocab, s.all_logits);
      st.last_logits.assign(out + (count - 1) * vocab, out + count * vocab);
      lr_done += static_cast<int>(count);
    }
    st.tokens.insert(st.tokens.end(), s.ids.begin(), s.ids.end());
    st.position += static_cast<int64_t>(n);
  }

  // Totals, and each sequence's share of the pass by its rows.
  const double total = std::chrono::duration<double>(Clock::now() - t_start).count();
  wait += moe.wait_s;
  const WeightStats after = src.stats();
  last_.sequences = S;
  last_.rows = R;
  last_.wait_s = wait;
  last_.compute_s = total - wait;
  last_.trunk_bytes_read = (after.trunk_bytes_read - before.trunk_bytes_read) +
                           (after.head_bytes_read - before.head_bytes_read);
  last_.expert_bytes_read = after.expert_bytes_read - before.expert_bytes_read;
  last_.other_bytes_read = after.embedding_bytes_read - before.embedding_bytes_read;
  last_.expert_computations = moe.expert_computations;
  stats_.tokens += static_cast<uint64_t>(R);
  stats_.passes += 1;
  stats_.wait_s += wait;
  stats_.compute_s += total - wait;
  stats_.expert_computations += moe.expert_computations;
  stats_.max_sequences = std::max(stats_.max_sequences, S);
  stats_.sequence_passes += static_cast<uint64_t>(S);
  if (options_.record_routing && decode_only) routing_.add_tokens(static_cast<uint64_t>(R));
  for (const SeqStep& s : steps)
    if (s.usage) s.usage->add(usage_share(s.ids.size(), last_));
  return Status();
}

Status Forward::keep(SequenceState& state, int rows) {
  auto it = std::find_if(unsettled_.begin(), unsettled_.end(),
                         [&](const Unsettled& u) { return u.state == &state; });
  if (it == unsettled_.end())
    return invalid_argument("keep: the state was not a tentative step of the last pass");
  if (rows < 1 || rows > it->rows)
    return invalid_argument("keep: " + std::to_string(rows) + " rows of a step that fed " +
                            std::to_string(it->rows));
  const ModelConfig& c = config_;
  const int64_t positions = it->position0 + rows;
  int kda_layer = 0;
  for (int l = 0; l < c.layers; ++l) {
    LayerState& ls = state.layers[static_cast<size_t>(l)];
    if (c.attention[static_cast<size_t>(l)] == AttentionKind::kMla)
      mla_keep(c, ls, positions);
    else
      kda_keep(c, ls, acts_.rollback, acts_.shape, it->slot, kda_layer++, it->rows, rows,
               acts_.kda);
  }
  const size_t vocab = static_cast<size_t>(c.vocab);
  const float* last =
      acts_.stream.logits.data() + (it->logits_row0 + static_cast<size_t>(rows - 1)) * vocab;
  state.last_logits.assign(last, last + vocab);
  state.tokens.resize(static_cast<size_t>(positions));
  state.position = positions;
  unsettled_.erase(it);
  return Status();
}

}  // namespace nj
