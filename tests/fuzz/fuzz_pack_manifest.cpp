// Fuzzes the packed trunk's manifest (engine/weights/pack.h): the input is
// nightjar-trunk.manifest.json in a copy of the tiny-mxfp4 fixture that also holds a valid
// pack. The copy's files get a fixed modification time, so that a manifest written for it
// (the seeds: `nightjar pack` on such a copy, see make_seeds.sh) matches on every run.
//
// A manifest is refused (the pack is not used, with a reason naming the manifest), or
// accepted with every unit's extents inside the pack file and every tensor inside its
// unit's buffer: what the streaming and resident sources rely on when they read.
#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "engine/io/env.h"
#include "engine/model/config.h"
#include "engine/model/layout.h"
#include "engine/model/tensor_index.h"
#include "engine/weights/pack.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// The seeds' manifests were written for files with this modification time.
constexpr int64_t kFixedMtimeS = 1000000000;

struct Fixture {
  std::string dir;
  nj::TensorIndex index;
  nj::ModelLayout layout;
  uint64_t pack_bytes = 0;
};

void set_mtime(const std::string& path) {
  const struct timespec times[2] = {{kFixedMtimeS, 0}, {kFixedMtimeS, 0}};
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0)
    nj::fuzz::fail("cannot set the time of " + path);
}

Fixture* open_fixture() {
  using namespace nj;
  const std::string golden = fuzz::source_path("tests/golden/tiny-mxfp4");
  for (const char* f : {"config.json", "model.safetensors"})
    set_mtime(
        fuzz::write_scratch(std::string("model/") + f, fuzz::read_file_or_die(golden + "/" + f)));
  const std::string dir = fuzz::scratch_dir() + "/model";
  auto config = load_model_config(dir);
  if (!config.ok()) fuzz::fail(config.status().message());
  auto index = TensorIndex::open(dir, 1);
  if (!index.ok()) fuzz::fail(index.status().message());
  auto layout = ModelLayout::build(*config, *index);
  if (!layout.ok()) fuzz::fail(layout.status().message());
  auto stats = write_trunk_pack(*Env::posix(), *index, *layout, dir);
  if (!stats.ok()) fuzz::fail(stats.status().message());
  return new Fixture{dir, std::move(index).value(), std::move(layout).value(), stats->pack_bytes};
}

Fixture* fixture() {
  static Fixture* fx = open_fixture();  // lives for the process
  return fx;
}

}  // namespace

// The fixture is made before fuzzing starts (outside libFuzzer's per-input timeout).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  Fixture* fx = fixture();
  const std::string manifest =
      fuzz::write_scratch(std::string("model/") + kPackManifest, fuzz::bytes(data, size));
  ModelLayout layout = fx->layout;
  const uint32_t pack_file = static_cast<uint32_t>(fx->index.files().size());
  std::string reason;
  auto used = use_trunk_pack(*Env::posix(), fx->dir, fx->index, &layout, pack_file, &reason);
  fuzz::check(used.ok(), "use_trunk_pack failed instead of refusing: " + used.status().message());
  if (!*used) {
    fuzz::note(reason);
    fuzz::check(reason.find(manifest) != std::string::npos,
                "the reason does not name the manifest: " + reason);
    return 0;
  }
  auto check_unit = [&](const UnitLayout& unit, const std::vector<TensorSlot*>& slots,
                        const std::string& what) {
    for (const Extent& e : unit.extents) {
      if (e.file != pack_file) continue;
      fuzz::check(e.file_offset <= fx->pack_bytes && e.length <= fx->pack_bytes - e.file_offset,
                  what + ": an extent accepted outside the pack");
      fuzz::check(
          e.buffer_offset <= unit.buffer_bytes && e.length <= unit.buffer_bytes - e.buffer_offset,
          what + ": an extent accepted outside the unit's buffer");
    }
    fuzz::check(unit.checksum_bytes <= unit.buffer_bytes,
                what + ": a checksum accepted over more than the buffer");
    for (const TensorSlot* s : slots) {
      if (!s->info) continue;
      fuzz::check(s->buffer_offset <= unit.buffer_bytes &&
                      s->info->nbytes <= unit.buffer_bytes - s->buffer_offset,
                  what + ": tensor '" + std::string(s->info->name) + "' accepted outside its unit");
    }
  };
  for (int l = 0; l < layout.config().layers; ++l)
    check_unit(layout.layer(l).unit, trunk_slots(layout.mutable_layer(l)),
               "layer " + std::to_string(l));
  check_unit(layout.head().unit, head_slots(layout.mutable_head()), "head");
  fuzz::note("accepted");
  return 0;
}
