// The replay of a job's passes (runner/job_plan.h) and the pass cost model under it
// (engine/plan/pass_cost.h), on the tiny golden model with kernel rates set by hand.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/model/config.h"
#include "engine/model/layout.h"
#include "engine/model/tensor_index.h"
#include "engine/plan/kernel_rates.h"
#include "engine/plan/pass_cost.h"
#include "engine/plan/planner.h"
#include "runner/forecast/job_plan.h"
#include "tests/unit/model/test_models.h"
#include "tests/unit/model/test_options.h"

namespace nj::runner {
namespace {

using Catch::Matchers::WithinRel;

// tiny-mxfp4's config, index and layout.
testing::LoadedLayout tiny_mxfp4() {
  return testing::load_layout(testing::golden_dir("tiny-mxfp4"));
}

// One nanosecond per weight element at every rung: compute proportional to elements.
KernelRates flat_rates() {
  KernelRates r;
  for (auto& ladder : r.per_element) ladder.fill(1e-9);
  return r;
}

ResidencyPlan plan_at(const ModelLayout& layout, uint64_t budget, int batch) {
  PlanOptions o;
  o.max_context = 256;
  o.batch = batch;
  auto p = plan_residency(layout, budget, o);
  REQUIRE(p.ok());
  return *p;
}

JobWork items(int n, int64_t prompt, int64_t decode) {
  JobWork w;
  for (int i = 0; i < n; ++i) w.items.push_back(ItemWork{0, prompt, decode});
  return w;
}

TEST_CASE("a job's passes follow the runner's chunks, batches and rows", "[job-plan]") {
  const testing::LoadedLayout f = tiny_mxfp4();
  const ResidencyPlan plan = plan_at(f.layout, 0, 1);
  const KernelRates rates = flat_rates();
  const PassCostModel cost(f.layout, plan, rates, 1.0);

  // One at a time: 100 prompt rows in chunks of 64 (2 passes), then 3 decode rows.
  JobPrediction one = predict_job(items(4, 100, 3), JobPlanShape{1, 64, 64}, cost);
  CHECK(one.items == 4);
  CHECK(one.passes == 4 * (2 + 3));
  CHECK(one.rows == 4 * 103);
  CHECK(one.max_batch == 1);

  // Four together, room for all their chunks: a pass carries each item's step.
  JobPrediction four = predict_job(items(4, 100, 3), JobPlanShape{4, 256, 64}, cost);
  CHECK(four.passes == 2 + 3);
  CHECK(four.rows == one.rows);
  CHECK(four.max_batch == 4);

  // Four together in passes of 64 rows: prefill chunks take turns (oldest waiter first),
  // decode rows share.
  JobPrediction narrow = predict_job(items(4, 64, 2), JobPlanShape{4, 64, 64}, cost);
  CHECK(narrow.passes == 4 + 2);

  // Two places for five items: the next joins when one ends.
  JobPrediction queue = predict_job(items(5, 10, 1), JobPlanShape{2, 64, 64}, cost);
  CHECK(queue.passes == 3 * 2);
  CHECK(queue.max_batch == 2);

  // A shared prefix runs alone first.
  JobWork classify = items(2, 10, 1);
  classify.shared_prefix_rows = 70;
  for (ItemWork& w : classify.items) w.start_position = 70;
  CHECK(predict_job(classify, JobPlanShape{2, 128, 64}, cost).passes == 2 + 2);

  CHECK(predict_job(JobWork{}, JobPlanShape{}, cost).passes == 0);
}

TEST_CASE("the pass cost model counts compute per row and reads per pass", "[job-plan]") {
  const testing::LoadedLayout f = tiny_mxfp4();
  const KernelRates rates = flat_rates();
  const ModelConfig& c = f.layout.config();

  // Everything resident: nothing is read per pass; the model is read once when it opens.
  const ResidencyPlan resident = plan_at(f.layout, 0, 1);
  const PassCostModel r(f.layout, resident, rates, 1.0);
  const PassPrediction one = r.predict(PassShape{1, 1, 1});
  CHECK(one.disk_bytes == static_cast<double>(f.layout.embedding_row_bytes()));
  CHECK(r.load_bytes() > 0);
  // Compute: flat rates make a product cost its elements, whatever the rows; FLOPs grow
  // with the rows.
  const PassPrediction two = r.predict(PassShape{2, 1, 3});
  CHECK(two.flops > one.flops);
  CHECK(two.seconds >= one.seconds);

  // Streaming at the minimum: every pass reads the streamed trunk; more rows need more
  // distinct experts, at most all of them.
  const ResidencyPlan minimum = plan_at(f.layout, resident.min_memory_bytes, 1);
  const PassCostModel s(f.layout, minimum, rates, 1.0);
  const double d1 = s.distinct_experts(1), d64 = s.distinct_experts(64);
  CHECK_THAT(d1, WithinRel(static_cast<double>(c.top_k), 1e-9));
  CHECK(d64 > d1);
  CHECK(d64 <= c.num_experts);
  CHECK(s.predict(PassShape{64, 1, 64}).disk_bytes > s.predict(PassShape{1, 1, 1}).disk_bytes);
  CHECK_THAT(s.predict(PassShape{1, 1, 1}).disk_bytes,
             WithinRel(static_cast<double>(minimum.predicted_bytes_per_step()), 1e-6));
  // At 1 GB/s a pass takes its expert reads, then the larger of its trunk reads and compute.
  const PassPrediction p = s.predict(PassShape{1, 1, 1});
  CHECK(p.expert_io_seconds > 0);
  CHECK_THAT(p.seconds, WithinRel(p.expert_io_seconds + std::max(p.io_seconds - p.expert_io_seconds,
                                                                 p.compute_seconds),
                                  1e-12));
  CHECK(p.seconds >= p.disk_bytes / 1e9);
}

// Every MoE layer of `profile` records `rows` rows, each choosing `per_row(row)`.
template <typename PerRow>
void record_rows(const ModelConfig& c, RoutingProfile& profile, int rows, PerRow per_row) {
  for (int l = 0; l < c.layers; ++l) {
    if (c.is_dense(l)) continue;
    std::vector<int32_t> end(static_cast<size_t>(c.num_experts) + 1, 0);
    for (int r = 0; r < rows; ++r)
      for (int e : per_row(r)) end[static_cast<size_t>(e) + 1]++;
    for (int e = 0; e < c.num_experts; ++e) end[static_cast<size_t>(e) + 1] += end[static_cast<size_t>(e)];
    profile.record_choices(l, end.data(), rows);
  }
}

TEST_CASE("a routing profile's recorded choices decide a pass's distinct experts", "[job-plan]") {
  const testing::LoadedLayout f = tiny_mxfp4();
  const KernelRates rates = flat_rates();
  const ModelConfig& c = f.layout.config();
  const int E = c.num_experts, k = c.top_k;
  REQUIRE(E >= 2 * k);
  const ResidencyPlan resident = plan_at(f.layout, 0, 1);
  const ResidencyPlan minimum = plan_at(f.layout, resident.min_memory_bytes, 1);
  const PassCostModel uniform(f.layout, minimum, rates, 1.0);

  // Every row chose the same k experts (as the sparse K3 layout's zeros route): a pass of any
  // rows needs those k, and reads no more experts than a pass of one row.
  RoutingProfile same(c.layers, E);
  record_rows(c, same, 50, [&](int) {
    std::vector<int> e(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) e[static_cast<size_t>(j)] = j;
    return e;
  });
  const PassCostModel concentrated(f.layout, minimum, rates, 1.0, &same);
  CHECK_THAT(concentrated.distinct_experts(1), WithinRel(static_cast<double>(k), 1e-12));
  CHECK_THAT(concentrated.distinct_experts(500), WithinRel(static_cast<double>(k), 1e-12));
  CHECK(uniform.distinct_experts(500) > 2 * k);
  const double embedding = static_cast<double>(f.layout.embedding_row_bytes());
  CHECK_THAT(concentrated.predict(PassShape{500, 1, 500}).disk_bytes - 499 * embedding,
             WithinRel(concentrated.predict(PassShape{1, 1, 1}).disk_bytes, 1e-9));

  // Rows spread evenly over the experts (each chosen by k/E of them): uniform routing's count.
  RoutingProfile even(c.layers, E);
  record_rows(c, even, E, [&](int r) {
    std::vector<int> e;
    for (int j = 0; j < k; ++j) e.push_back((r + j) % E);
    return e;
  });
  const PassCostModel spread(f.layout, minimum, rates, 1.0, &even);
  for (int rows : {1, 7, 64, 1000})
    CHECK_THAT(spread.distinct_experts(rows), WithinRel(uniform.distinct_experts(rows), 1e-12));

  // The residency plan's step takes it too.
  PlanOptions o;
  o.max_context = 256;
  o.batch = 4;
  o.routing = &same;
  auto plan = plan_residency(f.layout, resident.min_memory_bytes * 2, o);
  REQUIRE(plan.ok());
  CHECK_THAT(plan->predicted_distinct_experts, WithinRel(static_cast<double>(k), 1e-12));
  CHECK(plan->routing_profile_used);

  // The choices survive the file; a version 1 profile (no choices) reads and predicts
  // uniformly; counts no row could make are refused.
  auto back = RoutingProfile::parse(same.to_json(42), "p.json", 42);
  REQUIRE(back.ok());
  int moe = 0;
  while (c.is_dense(moe)) ++moe;
  CHECK_THAT(back->expected_distinct(moe, 300), WithinRel(static_cast<double>(k), 1e-12));
  auto v1 = RoutingProfile::parse(
      R"({"format":"nightjar-routing-profile","version":1,"model_fingerprint":"000000000000002a",)"
      R"("tokens":3,"layers":[{"layer":1,"requests":6,"first_use":2,"distances":[4]}]})",
      "v1.json", 42);
  REQUIRE(v1.ok());
  CHECK(v1->expected_distinct(1, 10) == -1);
  CHECK(v1->hit_rate(1, 1) == 4.0 / 6.0);
  std::string bad = same.to_json(42);
  const size_t rows_at = bad.find("\"rows\":50");
  REQUIRE(rows_at != std::string::npos);
  bad.replace(rows_at, 9, "\"rows\":10");
  auto corrupt = RoutingProfile::parse(bad, "bad.json", 42);
  REQUIRE_FALSE(corrupt.ok());
  CHECK(corrupt.status().code() == StatusCode::kCorruption);
  CHECK_THAT(corrupt.status().message(), Catch::Matchers::Contains("bad.json"));
}

// Rates that cost only one kind of element work, one nanosecond per element; products free.
KernelRates only(double KernelRates::ElementRates::*rate, int threads) {
  KernelRates r;
  r.element.*rate = 1e-9;
  r.threads = threads;
  return r;
}

TEST_CASE("the pass cost model counts the work outside the products, by element", "[job-plan]") {
  // tiny-mxfp4: hidden 128, 13 layers (layer 0 dense, 12 MoE), KDA layers 1-3, 5-7, 9-11 (9) of
  // 4 heads of D = 16, MLA layers 4, 8, 12, 13 (4) of 4 heads, kv_lora 32, rope 8; dense_inter
  // 96; 8 experts top-2 of moe_inter 64, 2 shared experts (shared_inter 128).
  const testing::LoadedLayout f = tiny_mxfp4();
  const ResidencyPlan plan = plan_at(f.layout, 0, 1);

  // SiTU: the dense layer's 96 and each MoE layer's shared 128 on one thread; the routed
  // experts' 2 x 64 per MoE layer split over the threads.
  const KernelRates situ = only(&KernelRates::ElementRates::situ, 2);
  const PassPrediction s = PassCostModel(f.layout, plan, situ, 1.0).predict(PassShape{1, 1, 1});
  CHECK_THAT(s.element_seconds, WithinRel((96 + 12 * 128 + 12 * 128 / 2.0) * 1e-9, 1e-9));
  CHECK_THAT(s.compute_seconds, WithinRel(s.element_seconds, 1e-9));  // products cost nothing here
  const PassPrediction s3 = PassCostModel(f.layout, plan, situ, 1.0).predict(PassShape{3, 1, 6});
  CHECK_THAT(s3.element_seconds, WithinRel(3 * s.element_seconds, 1e-9));

  // KDA's recurrence: H·D² per row and KDA layer, split over the threads.
  const KernelRates kda = only(&KernelRates::ElementRates::kda, 1);
  CHECK_THAT(PassCostModel(f.layout, plan, kda, 1.0).predict(PassShape{2, 1, 3}).element_seconds,
             WithinRel(2 * 9 * 4 * 16 * 16 * 1e-9, 1e-9));

  // MLA's scores: per attended position, per MLA layer and head, a dot of kv_lora + rope.
  const KernelRates dot = only(&KernelRates::ElementRates::dot, 1);
  const PassCostModel d(f.layout, plan, dot, 1.0);
  CHECK_THAT(d.predict(PassShape{2, 1, 13}).element_seconds -
                 d.predict(PassShape{2, 1, 3}).element_seconds,
             WithinRel(10 * 4 * 4 * (32 + 8) * 1e-9, 1e-9));

  // The router: top-k over the 8 experts in each of the 12 MoE layers, per row.
  const KernelRates top = only(&KernelRates::ElementRates::top_k, 1);
  CHECK_THAT(PassCostModel(f.layout, plan, top, 1.0).predict(PassShape{5, 1, 15}).element_seconds,
             WithinRel(5 * 12 * 8 * 1e-9, 1e-9));

  // With products too, compute is their sum; FLOPs do not change with the element rates.
  const KernelRates flat = flat_rates();
  KernelRates both = flat;
  both.element = situ.element;
  both.threads = 2;
  const PassCostModel withp(f.layout, plan, both, 1.0), without(f.layout, plan, flat, 1.0);
  const PassPrediction a = withp.predict(PassShape{4, 1, 10}),
                       b = without.predict(PassShape{4, 1, 10});
  CHECK_THAT(a.compute_seconds, WithinRel(b.compute_seconds + a.element_seconds, 1e-9));
  CHECK(b.element_seconds == 0);
  CHECK(a.flops == b.flops);
}

TEST_CASE("the pass cost model costs routed experts by the expert probe", "[job-plan]") {
  // tiny-mxfp4: 12 MoE layers of 8 experts top-2; matrix products free here.
  const testing::LoadedLayout f = tiny_mxfp4();
  const ModelConfig& c = f.layout.config();
  KernelRates r;
  r.experts.latent = c.latent;
  r.experts.moe_inter = c.moe_inter;
  r.experts.mxfp4 = c.mxfp4_experts;
  // 100 µs per expert alone (its own region), 10 µs grouped, at every rung up to the last;
  // the last (128 rows) twice that.
  r.experts.alone.fill(100e-6);
  r.experts.grouped.fill(10e-6);
  r.experts.alone.back() = 200e-6;
  r.experts.grouped.back() = 20e-6;
  REQUIRE(r.experts.measured());
  const ResidencyPlan resident = plan_at(f.layout, 0, 1);
  const ResidencyPlan minimum = plan_at(f.layout, resident.min_memory_bytes, 1);
  REQUIRE(minimum.predicted_expert_bytes_per_step > 0);

  // One row routes to top_k = 2 experts in each of the 12 MoE layers: 24 experts.
  const PassPrediction g = PassCostModel(f.layout, resident, r, 1.0).predict(PassShape{1, 1, 1});
  CHECK_THAT(g.expert_seconds, WithinRel(12 * 2 * 10e-6, 1e-9));
  CHECK_THAT(g.compute_seconds, WithinRel(g.expert_seconds, 1e-9));  // nothing else costs
  // Streamed experts are computed one by one as their reads arrive: each alone.
  const PassCostModel streamed(f.layout, minimum, r, 1.0);
  CHECK_THAT(streamed.predict(PassShape{1, 1, 1}).expert_seconds, WithinRel(12 * 2 * 100e-6, 1e-9));
  // 4 rows: d = 8·(1 − (6/8)^4) distinct experts per layer, each over 4·2/d rows (between
  // the rungs 1 and 2: flat at 100 µs).
  const double d = streamed.distinct_experts(4);
  CHECK_THAT(d, WithinRel(8 * (1 - std::pow(0.75, 4)), 1e-9));
  CHECK_THAT(streamed.predict(PassShape{4, 1, 10}).expert_seconds,
             WithinRel(12 * d * 100e-6, 1e-9));
  // Past the last rung in proportion to the rows: 1024 rows give every expert 256 rows, twice
  // the last rung's 128.
  CHECK_THAT(streamed.predict(PassShape{1024, 1, 1024}).expert_seconds,
             WithinRel(12 * 8 * 2 * 200e-6, 1e-9));
  // Between rungs, linearly: 112 rows are 3/4 of the way from 64 (100 µs) to 128 (200 µs).
  CHECK_THAT(r.experts.seconds(false, 112), WithinRel(175e-6, 1e-9));

  // The probe times the experts' SiTU too: it is no longer element work. Without the probe
  // (another shape) the matrix ladder and the SiTU element work come back.
  KernelRates situ = r;
  situ.element.situ = 1e-9;
  situ.threads = 2;
  const PassPrediction with =
      PassCostModel(f.layout, resident, situ, 1.0).predict(PassShape{1, 1, 1});
  CHECK_THAT(with.element_seconds, WithinRel((96 + 12 * 128) * 1e-9, 1e-9));
  situ.experts.latent += 1;
  const PassPrediction without =
      PassCostModel(f.layout, resident, situ, 1.0).predict(PassShape{1, 1, 1});
  CHECK_THAT(without.element_seconds, WithinRel((96 + 12 * 128 + 12 * 128 / 2.0) * 1e-9, 1e-9));
  CHECK(without.expert_seconds == 0);  // the ladder is all zero here
}

TEST_CASE("the expert probe times the engine's expert path", "[job-plan]") {
  const testing::LoadedLayout f = tiny_mxfp4();
  KernelRates r;
  r.measure_experts(f.layout.config(), 1);
  REQUIRE(r.experts.measured());
  CHECK(r.experts.latent == f.layout.config().latent);
  for (size_t i = 0; i < KernelRates::kExpertRows.size(); ++i) {
    CHECK(r.experts.alone[i] > 0);
    CHECK(r.experts.grouped[i] > 0);
    if (i > 0) CHECK(r.experts.alone[i] >= r.experts.alone[i - 1]);  // never falls with rows
  }
  CHECK(r.to_json().contains("expert_us"));
}

TEST_CASE("kernel rates interpolate between rungs and extrapolate linearly", "[job-plan]") {
  KernelRates r;
  // Time per element 1 ns up to 8 rows, then growing by 1 ns per 8 rows (8 ns at 64).
  for (size_t i = 0; i < KernelRates::kRows.size(); ++i)
    r.per_element[0][i] = 1e-9 * std::max(1.0, KernelRates::kRows[i] / 8.0);
  CHECK_THAT(r.seconds(ops::MatFormat::kBF16, 1e6, 4), WithinRel(1e-3, 1e-9));
  CHECK_THAT(r.seconds(ops::MatFormat::kBF16, 1e6, 48), WithinRel(6e-3, 1e-9));
  // Past the last rung, in proportion to the rows: 8 ns per element at 64 rows.
  CHECK_THAT(r.seconds(ops::MatFormat::kBF16, 1e6, 128), WithinRel(16e-3, 1e-9));
  CHECK_THAT(r.seconds(ops::MatFormat::kBF16, 1e6, 640), WithinRel(80e-3, 1e-9));
  CHECK(r.seconds(ops::MatFormat::kBF16, 1e6, 0) == 0);
  CHECK_THAT(r.gflops(ops::MatFormat::kBF16, 64), WithinRel(2.0 * 64 / 8.0, 1e-9));
}

}  // namespace
}  // namespace nj::runner
