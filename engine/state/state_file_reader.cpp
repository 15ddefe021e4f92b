// load_state_file: reads and verifies a state checkpoint. The format, version 2 (version 1
// differs only where marked, and is still read):
//
// A checkpoint at PATH is the head file PATH and the segment file DIR/<segment_name>
// that the head names (DIR = PATH's directory). Integers are unsigned little-endian
// unless marked; f32 is IEEE-754 binary32 little-endian. XXH3 is XXH3-64.
//
//   head           := head_header section{section_count}              (nothing after)
//   head_header    := "NJSTHEAD"               8 bytes, magic
//                     version        u32       = 2 (or 1)
//                     header_bytes   u32       = 56
//                     fingerprint    u64       Model::fingerprint() of the writing model
//                     position       u64       P, tokens consumed
//                     generation     u64       G, names the segment generation
//                     section_count  u32       = 3 + number of KDA layers
//                     numerics       u32       kNumericsVersion of the writing binary
//                                              (engine/ops/numerics.h); version 1: a
//                                              reserved 0, read as numerics 0 (unrecorded)
//                     header_hash    u64       XXH3(the 48 bytes above)
//   section        := tag u32, index u32, length u64, hash u64, payload[length]
//                     hash = XXH3(tag index length ++ payload)
//   sections, exactly in this order:
//     tag "SMPL" index 0, length 32:   temperature f32, top_k i32, top_p f32, reserved u32,
//                                      seed u64, rng u64 (the RNG after the last sample)
//     tag "LGTS" index 0:              last_logits f32[vocab]; length 0 when P = 0
//     tag "KDAS" index l, for every KDA layer l ascending:
//                                      S f32[H][D][D] ++ conv f32[K-1][3][H·D]
//     tag "SEGM" index 0:              committed_bytes u64, record_count u64, chain_hash u64,
//                                      name_bytes u32 (1..255), segment_name[name_bytes]
//
//   segment        := segment_header record{record_count} ignored_tail
//                     (only the first committed_bytes bytes count; ignored_tail is what an
//                     interrupted append left behind, and is never read)
//   segment_header := "NJSTSEGM"               8 bytes, magic
//                     version u32 = 1 (in both head versions), header_bytes u32 = 48,
//                     fingerprint u64 (= the head's), generation u64 (= the head's G),
//                     row_floats u32 (= kv_lora_rank + qk_rope_head_dim),
//                     mla_layers u32 (= number of MLA layers),
//                     header_hash u64 = XXH3(the 40 bytes above)
//   record         := "NJRC" (u32 0x43524a4e), count u32 (>= 1), first_position u64,
//                     payload_bytes u64, hash u64, payload[payload_bytes]
//                     payload = tokens i32[count]
//                               ++ for every MLA layer ascending:
//                                    latent f32[count][kv_lora_rank] ++ rope f32[count][qk_rope]
//                     hash = XXH3 with seed C of (the first 24 header bytes ++ payload),
//                     C = the previous record's hash, or G for the first record
//   Records are contiguous: the first starts at position 0, each one's first_position is
//   the sum of the counts before it, and the counts sum to P. The head's chain_hash is the
//   last record's hash (G when there are none), so the head commits the exact sequence of
//   records, and committed_bytes = 48 + 32·record_count + P·(4 + 4·mla_layers·row_floats).
//
// Validation order: magic, version, header hash, fingerprint, numerics (unless the caller
// accepts any), then each length against the model's config before anything is allocated
// or read, then each checksum.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "engine/ops/numerics.h"
#include "engine/state/state_file.h"
#include "engine/state/state_format.h"

namespace nj {

using namespace state_format;

namespace {

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A destination for part of a payload: read straight into the state, hashed on the way.
struct Dest {
  void* p;
  size_t n;
};
template <typename T>
Dest dest(std::vector<T>& v, size_t first, size_t count) {
  return {v.data() + first, count * sizeof(T)};
}

// Reads one file of a checkpoint, with errors naming it.
class Reader {
 public:
  Reader(std::unique_ptr<RandomAccessFile> f, std::string what)
      : f_(std::move(f)), what_(std::move(what)) {}

  uint64_t size() const { return f_->size(); }
  Status corrupt(const std::string& m) const { return corruption(what_ + ": " + m); }

  // Reads dests in order starting at `offset`, hashing them into `h`. `limit` is where
  // the readable part ends (file size or committed length); `part` names what is read.
  Status read(uint64_t offset, std::initializer_list<Dest> dests, Hasher* h, uint64_t limit,
              const std::string& part) {
    uint64_t n = 0;
    for (const Dest& d : dests) n += d.n;
    if (offset > limit || n > limit - offset)
      return corrupt("truncated: " + part + " needs " + std::to_string(n) + " bytes at offset " +
                     std::to_string(offset) + " but " +
                     (limit == size() ? "the file ends at " : "the committed part ends at ") +
                     std::to_string(limit));
    for (const Dest& d : dests) {
      if (d.n == 0) continue;
      NJ_RETURN_IF_ERROR(f_->read_at(offset, d.p, d.n));
      if (h) h->update(d.p, d.n);
      offset += d.n;
    }
    return Status();
  }

 private:
  std::unique_ptr<RandomAccessFile> f_;
  std::string what_;
};

struct SegmentRef {
  uint64_t committed_bytes = 0, record_count = 0, chain = 0;
  std::string name;
};

// Reads one head section whose tag, index and exact length are known from the config.
Status read_section(Reader& r, uint64_t& off, uint32_t tag, uint32_t index, uint64_t want_len,
                    std::initializer_list<Dest> dests, const std::string& name) {
  char hdr[kSectionHeaderBytes];
  NJ_RETURN_IF_ERROR(
      r.read(off, {{hdr, sizeof hdr}}, nullptr, r.size(), "the header of section " + name));
  const uint32_t got_tag = get_u32(hdr), got_index = get_u32(hdr + 4);
  const uint64_t len = get_u64(hdr + 8), hash = get_u64(hdr + 16);
  if (got_tag != tag || got_index != index)
    return r.corrupt("expected section " + name + " at offset " + std::to_string(off) + ", found " +
                     tag_name(got_tag) + " index " + std::to_string(got_index));
  if (len != want_len)
    return r.corrupt("inconsistent lengths: section " + name + " is " + std::to_string(len) +
                     " bytes, this model's state needs " + std::to_string(want_len));
  Hasher h;
  h.update(hdr, 16);
  NJ_RETURN_IF_ERROR(r.read(off + sizeof hdr, dests, &h, r.size(), "section " + name));
  if (h.digest() != hash) return r.corrupt("checksum mismatch in section " + name);
  off += sizeof hdr + len;
  return Status();
}

Status read_segment_ref(Reader& r, uint64_t& off, SegmentRef& ref) {
  const std::string name = "'SEGM'";
  char hdr[kSectionHeaderBytes];
  NJ_RETURN_IF_ERROR(
      r.read(off, {{hdr, sizeof hdr}}, nullptr, r.size(), "the header of section " + name));
  if (get_u32(hdr) != kTagSegment || get_u32(hdr + 4) != 0)
    return r.corrupt("expected section " + name + " at offset " + std::to_string(off) + ", found " +
                     tag_name(get_u32(hdr)) + " index " + std::to_string(get_u32(hdr + 4)));
  const uint64_t len = get_u64(hdr + 8);
  if (len <= kSegmentRefFixedBytes || len > kSegmentRefFixedBytes + kMaxSegmentNameBytes)
    return r.corrupt("inconsistent lengths: section " + name + " is " + std::to_string(len) +
                     " bytes, expected " + std::to_string(kSegmentRefFixedBytes + 1) + ".." +
                     std::to_string(kSegmentRefFixedBytes + kMaxSegmentNameBytes));
  std::string payload(len, '\0');
  Hasher h;
  h.update(hdr, 16);
  NJ_RETURN_IF_ERROR(
      r.read(off + sizeof hdr, {{payload.data(), len}}, &h, r.size(), "section " + name));
  if (h.digest() != get_u64(hdr + 16)) return r.corrupt("checksum mismatch in section " + name);
  ref.committed_bytes = get_u64(payload.data());
  ref.record_count = get_u64(payload.data() + 8);
  ref.chain = get_u64(payload.data() + 16);
  const uint32_t name_bytes = get_u32(payload.data() + 24);
  if (name_bytes != len - kSegmentRefFixedBytes)
    return r.corrupt("inconsistent lengths: segment name of " + std::to_string(name_bytes) +
                     " bytes in a section of " + std::to_string(len));
  ref.name = payload.substr(kSegmentRefFixedBytes);
  if (ref.name == "." || ref.name == ".." ||
      ref.name.find_first_of(std::string("/\0", 2)) != std::string::npos)
    return r.corrupt("invalid segment name '" + ref.name + "'");
  off += sizeof hdr + len;
  return Status();
}

Status read_segment(Env& env, const std::string& head_path, const StateShape& shape,
                    uint64_t fingerprint, uint64_t generation, const SegmentRef& ref,
                    SequenceState& s) {
  const std::string path = dir_name(head_path) + "/" + ref.name;
  auto file = env.open_read(path);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound)
      return corruption("state checkpoint " + head_path + ": its segment " + path + " is missing");
    return file.status();
  }
  Reader r(std::move(*file), "state segment " + path);
  const uint64_t P = static_cast<uint64_t>(s.position), per_pos = shape.position_bytes();
  if (r.size() < ref.committed_bytes)
    return r.corrupt("truncated: the file is " + std::to_string(r.size()) +
                     " bytes, the head commits " + std::to_string(ref.committed_bytes));
  // committed = header + record headers + P rows; checked before allocating P rows.
  if (static_cast<unsigned __int128>(ref.committed_bytes) !=
          kSegmentHeaderBytes +
              static_cast<unsigned __int128>(kRecordHeaderBytes) * ref.record_count +
              static_cast<unsigned __int128>(P) * per_pos ||
      (P == 0) != (ref.record_count == 0))
    return r.corrupt("inconsistent lengths: the head commits " +
                     std::to_string(ref.committed_bytes) + " bytes in " +
                     std::to_string(ref.record_count) + " records for " + std::to_string(P) +
                     " positions of " + std::to_string(per_pos) + " bytes");
  const uint64_t limit = ref.committed_bytes;

  char hdr[kSegmentHeaderBytes];
  NJ_RETURN_IF_ERROR(r.read(0, {{hdr, sizeof hdr}}, nullptr, limit, "the segment header"));
  if (std::memcmp(hdr, kSegmentMagic, sizeof kSegmentMagic) != 0)
    return r.corrupt("not a Nightjar state segment (bad magic)");
  if (get_u32(hdr + 8) != kSegmentVersion)
    return r.corrupt("unsupported segment version " + std::to_string(get_u32(hdr + 8)) +
                     " (this build reads " + std::to_string(kSegmentVersion) + ")");
  if (get_u64(hdr + 40) != hash64(hdr, 40))
    return r.corrupt("checksum mismatch in the segment header");
  if (get_u32(hdr + 12) != kSegmentHeaderBytes)
    return r.corrupt("inconsistent lengths: header_bytes " + std::to_string(get_u32(hdr + 12)));
  if (get_u64(hdr + 16) != fingerprint || get_u64(hdr + 24) != generation)
    return r.corrupt("the segment belongs to another checkpoint (fingerprint " +
                     hex64(get_u64(hdr + 16)) + ", generation " + hex64(get_u64(hdr + 24)) +
                     "; the head expects " + hex64(fingerprint) + ", " + hex64(generation) + ")");
  if (get_u32(hdr + 32) != shape.kv_lora + shape.rope ||
      get_u32(hdr + 36) != shape.mla_layers.size())
    return r.corrupt("inconsistent lengths: rows of " + std::to_string(get_u32(hdr + 32)) +
                     " floats in " + std::to_string(get_u32(hdr + 36)) +
                     " MLA layers; the model has " + std::to_string(shape.kv_lora + shape.rope) +
                     " in " + std::to_string(shape.mla_layers.size()));

  s.tokens.resize(P);
  for (int l : shape.mla_layers) {
    s.layers[static_cast<size_t>(l)].latent.resize(P * shape.kv_lora);
    s.layers[static_cast<size_t>(l)].rope.resize(P * shape.rope);
  }
  uint64_t off = kSegmentHeaderBytes, pos = 0, chain = generation;
  for (uint64_t i = 0; i < ref.record_count; ++i) {
    const std::string name = "record " + std::to_string(i);
    char rh[kRecordHeaderBytes];
    NJ_RETURN_IF_ERROR(r.read(off, {{rh, sizeof rh}}, nullptr, limit, "the header of " + name));
    const uint32_t count = get_u32(rh + 4);
    const uint64_t first = get_u64(rh + 8), payload_bytes = get_u64(rh + 16);
    if (get_u32(rh) != kRecordMagic)
      return r.corrupt(name + " at offset " + std::to_string(off) + ": bad magic");
    if (count == 0 || first != pos || count > P - pos || payload_bytes != count * per_pos)
      return r.corrupt("inconsistent lengths: " + name + " holds " + std::to_string(count) +
                       " positions from " + std::to_string(first) + " in " +
                       std::to_string(payload_bytes) + " bytes; expected positions from " +
                       std::to_string(pos) + " (of " + std::to_string(P) + ") at " +
                       std::to_string(per_pos) + " bytes each");
    Hasher h(chain);
    h.update(rh, 24);
    const uint64_t payload_off = off + sizeof rh;
    NJ_RETURN_IF_ERROR(
        r.read(payload_off, {dest(s.tokens, first, count)}, &h, limit, name + " tokens"));
    uint64_t o = payload_off + count * 4;
    for (int l : shape.mla_layers) {
      LayerState& ls = s.layers[static_cast<size_t>(l)];
      NJ_RETURN_IF_ERROR(r.read(o,
                                {dest(ls.latent, first * shape.kv_lora, count * shape.kv_lora),
                                 dest(ls.rope, first * shape.rope, count * shape.rope)},
                                &h, limit, name + " MLA layer " + std::to_string(l)));
      o += count * (shape.kv_lora + shape.rope) * 4;
    }
    if (h.digest() != get_u64(rh + 24))
      return r.corrupt("checksum mismatch in " + name + " (positions " + std::to_string(first) +
                       ".." + std::to_string(first + count) + ")");
    chain = get_u64(rh + 24);
    pos += count;
    off = o;
  }
  if (pos != P || off != limit || chain != ref.chain)
    return r.corrupt("the records do not match the head (" + std::to_string(pos) +
                     " positions, chain " + hex64(chain) + "; the head commits " +
                     std::to_string(P) + ", " + hex64(ref.chain) + ")");
  for (uint64_t i = 0; i < P; ++i)
    if (s.tokens[i] < 0 || static_cast<size_t>(s.tokens[i]) >= shape.vocab)
      return r.corrupt("token id " + std::to_string(s.tokens[i]) + " at position " +
                       std::to_string(i) + " is outside the vocabulary of " +
                       std::to_string(shape.vocab));
  return Status();
}

// The head's fixed header, verified (magic, version, checksum, header size, position).
struct HeadHeader {
  uint64_t fingerprint = 0, position = 0, generation = 0;
  uint32_t section_count = 0;
  uint32_t numerics = 0;  // 0 in format 1: not recorded
};

Result<HeadHeader> read_head_header(Reader& r, const std::string& path) {
  char hdr[kHeadHeaderBytes];
  const size_t first = static_cast<size_t>(std::min<uint64_t>(r.size(), sizeof hdr));
  NJ_RETURN_IF_ERROR(r.read(0, {{hdr, first}}, nullptr, r.size(), "the header"));
  if (first < sizeof kHeadMagic || std::memcmp(hdr, kHeadMagic, sizeof kHeadMagic) != 0)
    return r.corrupt(first < sizeof kHeadMagic
                         ? "truncated: the file is " + std::to_string(first) + " bytes"
                         : "not a Nightjar state checkpoint (bad magic)");
  if (first < sizeof hdr)
    return r.corrupt("truncated: the file is " + std::to_string(first) +
                     " bytes, shorter than its header");
  const uint32_t version = get_u32(hdr + 8);
  if (version != kVersion && version != kPreviousVersion)
    return failed_precondition(
        "state checkpoint " + path + ": unsupported format version " + std::to_string(version) +
        " (this build reads versions " + std::to_string(kPreviousVersion) + " and " +
        std::to_string(kVersion) + "; a newer Nightjar wrote it, or the header is damaged)");
  if (get_u64(hdr + 48) != hash64(hdr, 48)) return r.corrupt("checksum mismatch in the header");
  if (get_u32(hdr + 12) != kHeadHeaderBytes)
    return r.corrupt("inconsistent lengths: header_bytes " + std::to_string(get_u32(hdr + 12)));
  HeadHeader h{get_u64(hdr + 16), get_u64(hdr + 24), get_u64(hdr + 32), get_u32(hdr + 40),
               version == kPreviousVersion ? 0u : get_u32(hdr + 44)};
  if (h.position > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return r.corrupt("inconsistent lengths: position " + std::to_string(h.position));
  return h;
}

Result<Reader> open_head(Env& env, const std::string& path) {
  auto file = env.open_read(path);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound)
      return not_found("state checkpoint " + path + ": no such file");
    return file.status();
  }
  return Reader(std::move(*file), "state checkpoint " + path);
}

}  // namespace

Result<StateFileInfo> read_state_file_info(Env& env, const std::string& path) {
  NJ_ASSIGN_OR_RETURN(Reader r, open_head(env, path));
  NJ_ASSIGN_OR_RETURN(HeadHeader h, read_head_header(r, path));
  return StateFileInfo{h.fingerprint, static_cast<int64_t>(h.position), h.numerics};
}

Result<StateCheckpoint> load_state_file(Env& env, const std::string& path,
                                        const ModelConfig& config, uint64_t fingerprint,
                                        StateNumerics numerics) {
  const StateShape shape = shape_of(config);
  NJ_ASSIGN_OR_RETURN(Reader r, open_head(env, path));
  NJ_ASSIGN_OR_RETURN(HeadHeader h, read_head_header(r, path));
  if (h.fingerprint != fingerprint)
    return failed_precondition("state checkpoint " + path +
                               " was written for another model (fingerprint " +
                               hex64(h.fingerprint) + "; this model's is " + hex64(fingerprint) +
                               ")");
  if (numerics == StateNumerics::kCurrent && h.numerics != kNumericsVersion)
    return failed_precondition(
        "state checkpoint " + path + " was computed " +
        (h.numerics == 0 ? std::string("before numerics versions were recorded (format 1)")
                         : "with engine numerics version " + std::to_string(h.numerics)) +
        "; this binary computes with version " + std::to_string(kNumericsVersion) +
        ", so continuing it would mix two arithmetics (start again from the prompt)");
  const uint64_t P = h.position, generation = h.generation;
  if (h.section_count != 3 + shape.kda_layers.size())
    return r.corrupt("inconsistent lengths: " + std::to_string(h.section_count) +
                     " sections; this model's state has " +
                     std::to_string(3 + shape.kda_layers.size()));

  StateCheckpoint cp;
  cp.state = SequenceState::empty(config);  // fixed-size KDA buffers; P-sized ones after checks
  cp.state.position = static_cast<int64_t>(P);
  uint64_t off = kHeadHeaderBytes;

  char smp[kSamplerBytes];
  NJ_RETURN_IF_ERROR(
      read_section(r, off, kTagSampler, 0, kSamplerBytes, {{smp, sizeof smp}}, "'SMPL'"));
  SamplerSnapshot& sm = cp.sampler;
  sm.params.temperature = get_f32(smp);
  sm.params.top_k = static_cast<int>(get_u32(smp + 4));
  sm.params.top_p = get_f32(smp + 8);
  sm.params.seed = get_u64(smp + 16);
  sm.rng.s = get_u64(smp + 24);
  if (Status v = validate_sampling(sm.params); !v.ok())
    return r.corrupt("invalid sampler settings: " + v.message());

  const size_t vocab = P == 0 ? 0 : shape.vocab;
  cp.state.last_logits.resize(vocab);
  NJ_RETURN_IF_ERROR(read_section(r, off, kTagLogits, 0, vocab * 4,
                                  {dest(cp.state.last_logits, 0, vocab)}, "'LGTS'"));
  for (int l : shape.kda_layers) {
    LayerState& ls = cp.state.layers[static_cast<size_t>(l)];
    NJ_RETURN_IF_ERROR(read_section(
        r, off, kTagKda, static_cast<uint32_t>(l), (shape.s_floats + shape.conv_floats) * 4,
        {dest(ls.S, 0, shape.s_floats), dest(ls.conv, 0, shape.conv_floats)},
        "'KDAS' (layer " + std::to_string(l) + ")"));
  }
  SegmentRef ref;
  NJ_RETURN_IF_ERROR(read_segment_ref(r, off, ref));
  if (off != r.size())
    return r.corrupt("inconsistent lengths: " + std::to_string(r.size() - off) +
                     " bytes after the last section");
  NJ_RETURN_IF_ERROR(read_segment(env, path, shape, fingerprint, generation, ref, cp.state));
  cp.numerics_version = h.numerics;
  return cp;
}

Result<StateCheckpoint> load_state_file(Env& env, const std::string& path, const ModelIdentity& model) {
  return load_state_file(env, path, model.config, model.fingerprint, StateNumerics::kCurrent);
}

}  // namespace nj
