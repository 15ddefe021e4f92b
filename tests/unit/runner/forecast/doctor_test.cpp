#include "runner/forecast/doctor.h"

#include <catch2/catch.hpp>

namespace nj::runner {
namespace {

TEST_CASE("doctor's JSON carries every measured field", "[runner][doctor]") {
  DoctorReport r;
  r.version = "0.1.0";
  r.simd_active = "avx2";
  r.simd_detected = "avx512";
  r.ram_total_bytes = 24ull << 30;
  r.disk.dir = "/models";
  r.disk.odirect_supported = true;
  r.disk.direct_read_gbps = 2.6;
  r.disk.buffered_read_gbps = 0.6;
  auto j = doctor_json(r);
  CHECK(j["simd_level"] == "avx2");
  CHECK(j["simd_detected"] == "avx512");
  CHECK(j["odirect_supported"] == true);
  CHECK(j["direct_read_gbps"] == 2.6);
  CHECK(j["buffered_read_gbps"] == 0.6);
  CHECK(j["dir"] == "/models");
  CHECK(doctor_text(r).find("forced; detected avx512") != std::string::npos);

  r.disk.odirect_supported = false;
  CHECK(doctor_json(r)["direct_read_gbps"].is_null());
  CHECK(doctor_text(r).find("NOT supported") != std::string::npos);
}

TEST_CASE("doctor on a missing directory fails naming it", "[runner][doctor]") {
  DoctorOptions options;
  options.dir = "/nonexistent/nightjar-models";
  auto r = run_doctor(options, "test");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK(r.status().message().find("/nonexistent/nightjar-models") != std::string::npos);
}

TEST_CASE("doctor on a file rather than a directory is an error", "[runner][doctor]") {
  DoctorOptions options;
  options.dir = "/proc/self/status";
  auto r = run_doctor(options, "test");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("not a directory") != std::string::npos);
}

}  // namespace
}  // namespace nj::runner
