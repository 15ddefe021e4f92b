// StateFileWriter: writes state checkpoints (format: the grammar in state_file_reader.cpp).
//
// Order of a save, so that a crash at any instant leaves a loadable checkpoint:
//   new generation:  segment written by write_file_durably (temp, fsync, rename, fsync dir)
//                    → head by write_file_durably → older segments removed
//   append:          record appended to the committed segment and fdatasync'd
//                    → head by write_file_durably (commits the longer prefix)
// Until the head's rename, the previous head commits only the previous prefix of the
// previous segment, which nothing in a save modifies.
#include "engine/state/state_file.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "engine/ops/numerics.h"
#include "engine/io/durable.h"
#include "engine/state/state_format.h"

namespace nj {

using namespace state_format;

namespace {

// Where the head points: one generation's segment and the prefix of it that counts.
struct SegmentRef {
  uint64_t generation = 0;
  std::string name;
  uint64_t committed_bytes = 0;
  uint64_t record_count = 0;
  uint64_t chain = 0;  // hash of the last committed record, or the generation when none
};

// One record of the segment: positions [first, first + count), ready to append.
struct Record {
  std::string header;                    // kRecordHeaderBytes
  std::vector<std::string_view> pieces;  // header, tokens, then latent and rope per MLA layer
  uint64_t bytes = 0;                    // header + payload
  uint64_t hash = 0;
};

Record make_record(const StateShape& shape, const SequenceState& s, size_t first, size_t count,
                   uint64_t seed) {
  Record r;
  std::vector<std::string_view> payload;
  payload.push_back(bytes_of(s.tokens.data() + first, count));
  for (int l : shape.mla_layers) {
    const LayerState& ls = s.layers[static_cast<size_t>(l)];
    payload.push_back(bytes_of(ls.latent.data() + first * shape.kv_lora, count * shape.kv_lora));
    payload.push_back(bytes_of(ls.rope.data() + first * shape.rope, count * shape.rope));
  }
  uint64_t payload_bytes = 0;
  for (auto p : payload) payload_bytes += p.size();
  NJ_CHECK(payload_bytes == count * shape.position_bytes());
  put_u32(r.header, kRecordMagic);
  put_u32(r.header, static_cast<uint32_t>(count));
  put_u64(r.header, first);
  put_u64(r.header, payload_bytes);
  Hasher h(seed);
  h.update(r.header);
  for (auto p : payload) h.update(p);
  r.hash = h.digest();
  put_u64(r.header, r.hash);
  NJ_CHECK(r.header.size() == kRecordHeaderBytes);
  r.pieces.push_back(r.header);
  r.pieces.insert(r.pieces.end(), payload.begin(), payload.end());
  r.bytes = kRecordHeaderBytes + payload_bytes;
  return r;
}

std::string segment_header(uint64_t fingerprint, uint64_t generation, const StateShape& shape) {
  std::string h(kSegmentMagic, sizeof kSegmentMagic);
  put_u32(h, kSegmentVersion);
  put_u32(h, static_cast<uint32_t>(kSegmentHeaderBytes));
  put_u64(h, fingerprint);
  put_u64(h, generation);
  put_u32(h, static_cast<uint32_t>(shape.kv_lora + shape.rope));
  put_u32(h, static_cast<uint32_t>(shape.mla_layers.size()));
  put_u64(h, hash64(h.data(), h.size()));
  NJ_CHECK(h.size() == kSegmentHeaderBytes);
  return h;
}

// A head section: its 24-byte header (with the checksum) and views of its payload.
struct Section {
  std::string header;
  std::vector<std::string_view> pieces;
};

Section make_section(uint32_t tag, uint32_t index, std::vector<std::string_view> pieces) {
  Section sec;
  uint64_t length = 0;
  for (auto p : pieces) length += p.size();
  put_u32(sec.header, tag);
  put_u32(sec.header, index);
  put_u64(sec.header, length);
  Hasher h;
  h.update(sec.header);
  for (auto p : pieces) h.update(p);
  put_u64(sec.header, h.digest());
  sec.pieces = std::move(pieces);
  return sec;
}

uint64_t random_generation(Env& env, const std::string& dir, const std::string& base) {
  std::random_device rd;
  for (;;) {
    uint64_t g = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                 static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    if (g != 0 && !env.exists(dir + "/" + segment_name(base, g))) return g;
  }
}

}  // namespace

struct StateFileWriter::Written {
  uint64_t fingerprint = 0;
  SegmentRef ref;
  uint64_t positions = 0;
  std::vector<int32_t> tokens;                // [positions]
  std::vector<std::vector<float>> last_rows;  // per MLA layer: latent ++ rope of row positions-1
  std::unique_ptr<WritableFile> segment;      // open for appending at ref.committed_bytes
  SegmentRef pending;                         // the save in progress
};

StateFileWriter::StateFileWriter(Env& env, std::string path, StateFileWriterOptions options)
    : env_(env), path_(std::move(path)), options_(options) {}
StateFileWriter::~StateFileWriter() = default;

Status StateFileWriter::save(const ModelIdentity& model, const SequenceState& s,
                             const SamplerSnapshot& sampler) {
  return save(model.config, model.fingerprint, s, sampler);
}

Status StateFileWriter::save(const ModelConfig& config, uint64_t fingerprint,
                             const SequenceState& s, const SamplerSnapshot& sampler) {
  const StateShape shape = shape_of(config);
  NJ_RETURN_IF_ERROR(check_state_shape(shape, s).with_context("saving " + path_));
  const bool append = can_append(shape, fingerprint, s);
  StateSaveStats stats;
  stats.full = !append;
  Status st =
      append ? append_positions(shape, s, stats) : start_generation(shape, fingerprint, s, stats);
  if (st.ok()) st = write_head(shape, fingerprint, s, sampler, stats);
  if (!st.ok()) {
    w_.reset();  // the segment's end (or the head's reference) is no longer known: start anew
    return st;
  }
  w_->fingerprint = fingerprint;
  w_->ref = w_->pending;
  remember(shape, s);
  stats.segment_total_bytes = w_->ref.committed_bytes;
  last_ = stats;
  if (!append) remove_stale_segments();
  return Status();
}

bool StateFileWriter::can_append(const StateShape& shape, uint64_t fingerprint,
                                 const SequenceState& s) const {
  if (!w_ || w_->fingerprint != fingerprint || !w_->segment) return false;
  if (w_->ref.record_count >= options_.max_records_per_segment) return false;
  const uint64_t n = w_->positions;
  if (static_cast<uint64_t>(s.position) < n) return false;
  if (!std::equal(w_->tokens.begin(), w_->tokens.end(), s.tokens.begin())) return false;
  if (n == 0) return true;
  for (size_t i = 0; i < shape.mla_layers.size(); ++i) {
    const LayerState& ls = s.layers[static_cast<size_t>(shape.mla_layers[i])];
    const float* row = w_->last_rows[i].data();
    const float* latent = ls.latent.data() + (n - 1) * shape.kv_lora;
    const float* rope = ls.rope.data() + (n - 1) * shape.rope;
    if (std::memcmp(row, latent, shape.kv_lora * sizeof(float)) != 0) return false;
    if (std::memcmp(row + shape.kv_lora, rope, shape.rope * sizeof(float)) != 0) return false;
  }
  return true;
}

Status StateFileWriter::start_generation(const StateShape& shape, uint64_t fingerprint,
                                         const SequenceState& s, StateSaveStats& stats) {
  const std::string dir = dir_name(path_), base = base_name(path_);
  w_ = std::make_unique<Written>();
  SegmentRef& ref = w_->pending;
  ref.generation = random_generation(env_, dir, base);
  ref.name = segment_name(base, ref.generation);
  ref.chain = ref.generation;
  const std::string seg_path = dir + "/" + ref.name;
  const std::string header = segment_header(fingerprint, ref.generation, shape);
  const size_t P = static_cast<size_t>(s.position);
  Record rec;
  if (P > 0) rec = make_record(shape, s, 0, P, ref.chain);
  NJ_RETURN_IF_ERROR(write_file_durably(env_, seg_path, [&](WritableFile& f) -> Status {
    NJ_RETURN_IF_ERROR(f.append(header));
    for (auto p : rec.pieces) NJ_RETURN_IF_ERROR(f.append(p));
    return Status();
  }));
  ref.committed_bytes = kSegmentHeaderBytes + rec.bytes;
  ref.record_count = P > 0 ? 1 : 0;
  if (P > 0) ref.chain = rec.hash;
  stats.segment_bytes = ref.committed_bytes;
  NJ_ASSIGN_OR_RETURN(w_->segment, env_.new_appendable_file(seg_path));
  return Status();
}

Status StateFileWriter::append_positions(const StateShape& shape, const SequenceState& s,
                                         StateSaveStats& stats) {
  w_->pending = w_->ref;
  const uint64_t first = w_->positions, P = static_cast<uint64_t>(s.position);
  if (P == first) return Status();  // nothing new: only the head changes
  Record rec = make_record(shape, s, first, P - first, w_->ref.chain);
  NJ_RETURN_IF_ERROR(append_durably(*w_->segment, rec.pieces));
  w_->pending.committed_bytes += rec.bytes;
  w_->pending.record_count += 1;
  w_->pending.chain = rec.hash;
  stats.segment_bytes = rec.bytes;
  return Status();
}

Status StateFileWriter::write_head(const StateShape& shape, uint64_t fingerprint,
                                   const SequenceState& s, const SamplerSnapshot& sampler,
                                   StateSaveStats& stats) {
  const SegmentRef& ref = w_->pending;
  std::vector<Section> sections;

  std::string smp;
  put_f32(smp, sampler.params.temperature);
  put_u32(smp, static_cast<uint32_t>(sampler.params.top_k));
  put_f32(smp, sampler.params.top_p);
  put_u32(smp, 0);
  put_u64(smp, sampler.params.seed);
  put_u64(smp, sampler.rng.s);
  NJ_CHECK(smp.size() == kSamplerBytes);
  sections.push_back(make_section(kTagSampler, 0, {smp}));

  sections.push_back(
      make_section(kTagLogits, 0, {bytes_of(s.last_logits.data(), s.last_logits.size())}));
  for (int l : shape.kda_layers) {
    const LayerState& ls = s.layers[static_cast<size_t>(l)];
    sections.push_back(make_section(
        kTagKda, static_cast<uint32_t>(l),
        {bytes_of(ls.S.data(), ls.S.size()), bytes_of(ls.conv.data(), ls.conv.size())}));
  }
  std::string seg;
  put_u64(seg, ref.committed_bytes);
  put_u64(seg, ref.record_count);
  put_u64(seg, ref.chain);
  put_u32(seg, static_cast<uint32_t>(ref.name.size()));
  seg += ref.name;
  sections.push_back(make_section(kTagSegment, 0, {seg}));

  std::string header(kHeadMagic, sizeof kHeadMagic);
  put_u32(header, kVersion);
  put_u32(header, static_cast<uint32_t>(kHeadHeaderBytes));
  put_u64(header, fingerprint);
  put_u64(header, static_cast<uint64_t>(s.position));
  put_u64(header, ref.generation);
  put_u32(header, static_cast<uint32_t>(sections.size()));
  put_u32(header, kNumericsVersion);
  put_u64(header, hash64(header.data(), header.size()));
  NJ_CHECK(header.size() == kHeadHeaderBytes);

  uint64_t total = header.size();
  for (const Section& sec : sections) {
    total += sec.header.size();
    for (auto p : sec.pieces) total += p.size();
  }
  NJ_RETURN_IF_ERROR(write_file_durably(env_, path_, [&](WritableFile& f) -> Status {
    NJ_RETURN_IF_ERROR(f.append(header));
    for (const Section& sec : sections) {
      NJ_RETURN_IF_ERROR(f.append(sec.header));
      for (auto p : sec.pieces) NJ_RETURN_IF_ERROR(f.append(p));
    }
    return Status();
  }));
  stats.head_bytes = total;
  return Status();
}

void StateFileWriter::remember(const StateShape& shape, const SequenceState& s) {
  const size_t P = static_cast<size_t>(s.position);
  w_->tokens.insert(w_->tokens.end(), s.tokens.begin() + static_cast<long>(w_->positions),
                    s.tokens.end());
  w_->positions = P;
  w_->last_rows.assign(shape.mla_layers.size(), {});
  if (P == 0) return;
  for (size_t i = 0; i < shape.mla_layers.size(); ++i) {
    const LayerState& ls = s.layers[static_cast<size_t>(shape.mla_layers[i])];
    auto& row = w_->last_rows[i];
    row.assign(ls.latent.end() - static_cast<long>(shape.kv_lora), ls.latent.end());
    row.insert(row.end(), ls.rope.end() - static_cast<long>(shape.rope), ls.rope.end());
  }
}

void StateFileWriter::remove_stale_segments() {
  const std::string dir = dir_name(path_), base = base_name(path_);
  auto names = env_.children(dir);
  if (!names.ok()) return;  // best effort: a stale segment only wastes space
  for (const std::string& name : *names)
    if (name != w_->ref.name && is_segment_name_of(name, base)) (void)env_.remove(dir + "/" + name);
}

}  // namespace nj
