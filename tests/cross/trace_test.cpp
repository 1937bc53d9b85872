// trace.json, driven through the binary on the simulator, the local backend and under mpirun: it
// is valid JSON; per worker, the training track's spans nest; every bucket allreduce of a traced
// step is there with its bytes, from launch to completion inside the step; the three backends
// trace the same spans and flights; trace.workers and trace.steps select what is traced.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/run_command.hpp"

namespace trace_test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const std::string kBin = SYNCOPATE_BIN;
const std::string kScenario = std::string(SYNCOPATE_SOURCE_DIR) + "/tests/cross/small.toml";
constexpr double kEps = 1e-3;  // microseconds: the trace's times are rounded doubles

struct Span {
  std::string name, category;
  double start = 0, end = 0;  // microseconds
};
struct Flight {
  std::string name, algorithm;
  double start = 0, end = 0;
  uint64_t bytes = 0;
};
struct WorkerTrace {
  std::vector<Span> spans;  // sorted by start, parents before their children
  std::vector<Flight> flights;
  std::vector<int64_t> bytes_in_flight;  // the counter's values in time order
};

std::map<int, WorkerTrace> read_trace(const fs::path& file) {
  const json trace = json::parse(syncopate::read_text(file));  // throws if not JSON
  std::map<int, WorkerTrace> out;
  std::map<uint64_t, Flight> open;
  for (const json& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    WorkerTrace& w = out[e.at("pid").get<int>()];
    if (ph == "X") {
      EXPECT_EQ(e.at("tid"), 0);
      const double ts = e.at("ts"), dur = e.at("dur");
      EXPECT_GE(dur, 0.0) << e;
      w.spans.push_back({e.at("name"), e.at("cat"), ts, ts + dur});
    } else if (ph == "b") {
      const json& args = e.at("args");
      open[e.at("id")] = {e.at("name"), args.value("algorithm", ""), e.at("ts"), 0,
                          args.at("bytes").get<uint64_t>()};
    } else if (ph == "e") {
      const auto it = open.find(e.at("id"));
      if (it == open.end()) {
        ADD_FAILURE() << "an async end without its begin: " << e;
        continue;
      }
      it->second.end = e.at("ts");
      w.flights.push_back(it->second);
      open.erase(it);
    } else if (ph == "C") {
      w.bytes_in_flight.push_back(e.at("args").at("bytes").get<int64_t>());
    }
  }
  EXPECT_TRUE(open.empty()) << "async begins without their end";
  for (auto& [worker, w] : out)
    std::stable_sort(w.spans.begin(), w.spans.end(), [](const Span& a, const Span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
  return out;
}

// Spans of one track nest: each one lies inside the enclosing open span or after it.
void expect_nested(const std::vector<Span>& spans, int worker) {
  std::vector<const Span*> open;
  for (const Span& s : spans) {
    while (!open.empty() && open.back()->end <= s.start + kEps) open.pop_back();
    if (!open.empty()) {
      EXPECT_LE(s.end, open.back()->end + kEps)
          << "worker " << worker << ": " << s.name << " overlaps " << open.back()->name;
    }
    open.push_back(&s);
  }
}

std::vector<Span> spans_named(const WorkerTrace& w, const std::string& prefix) {
  std::vector<Span> out;
  for (const Span& s : w.spans)
    if (s.name.rfind(prefix, 0) == 0) out.push_back(s);
  return out;
}

// What lies inside [outer.start, outer.end].
template <typename T>
std::vector<T> inside(const std::vector<T>& all, const Span& outer) {
  std::vector<T> out;
  for (const T& x : all)
    if (x.start >= outer.start - kEps && x.end <= outer.end + kEps) out.push_back(x);
  return out;
}

// ddp on the small MLP in three buckets (one per dense layer), two steps of each epoch traced, on 2
// workers (the local backend runs one).
int workers_of(const std::string& backend) { return backend == "local" ? 1 : 2; }

fs::path run_ddp(const std::string& backend, int workers, const std::string& tag = "",
                 const std::string& extra = "") {
  const fs::path out =
      syncopate::scratch_folder("trace") / (backend + std::to_string(workers) + tag);
  fs::remove_all(out);
  const std::string launcher = backend == "mpi" ? syncopate::mpirun(workers) + " " : "";
  std::string log;
  EXPECT_EQ(
      syncopate::run_command(launcher + kBin + " run " + kScenario + " --backend " + backend +
                                 " --workers " + std::to_string(workers) +
                                 " --set strategy.bucket_mb=0.004 --set trace.steps=2 --out " +
                                 out.string() + " --quiet " + extra,
                             &log),
      0)
      << log;
  return out;
}

class TraceOf : public ::testing::TestWithParam<std::string> {};

TEST_P(TraceOf, SpansNestAndEveryBucketOfATracedStepIsThereWithItsBytes) {
  const int workers = workers_of(GetParam());
  const fs::path dir = run_ddp(GetParam(), workers);
  const std::map<int, WorkerTrace> trace = read_trace(dir / "trace.json");
  ASSERT_EQ(trace.size(), static_cast<size_t>(workers));
  const auto model_bytes = static_cast<uint64_t>(fs::file_size(dir / "model.bin"));
  for (const auto& [worker, w] : trace) {
    expect_nested(w.spans, worker);
    EXPECT_EQ(spans_named(w, "epoch ").size(), 2u);
    const std::vector<Span> steps = spans_named(w, "step ");
    ASSERT_EQ(steps.size(), 4u) << "trace.steps = 2 in each of 2 epochs";
    for (const Span& step : steps) {
      std::vector<std::string> parts;
      for (const Span& s : inside(w.spans, step)) parts.push_back(s.name);
      for (const char* part : {"forward", "loss", "backward", "optimizer"})
        EXPECT_NE(std::find(parts.begin(), parts.end(), part), parts.end()) << part;
      const std::vector<Flight> buckets = inside(w.flights, step);
      EXPECT_EQ(buckets.size(), 3u);
      uint64_t bytes = 0;
      for (const Flight& f : buckets) {
        EXPECT_EQ(f.name, "allreduce");
        EXPECT_GE(f.end, f.start);
        bytes += f.bytes;
        if (GetParam() != "local") {
          EXPECT_FALSE(f.algorithm.empty());
        }
      }
      EXPECT_EQ(bytes, model_bytes) << "the buckets cover the gradients exactly";
    }
    ASSERT_FALSE(w.bytes_in_flight.empty());
    EXPECT_EQ(w.bytes_in_flight.back(), 0);
    for (int64_t v : w.bytes_in_flight) EXPECT_GE(v, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TraceOf, ::testing::Values("sim", "local", "mpi"));

// A step's spans and its flights' sizes are the same whichever backend ran it at the same
// worker count (the algorithm too, where the backend runs schedules: the simulator and MPI).
struct StepContent {
  std::vector<std::string> names;  // spans other than waits (those depend on timing), sorted
  std::vector<uint64_t> sizes;
  std::vector<std::string> algorithms;
  bool operator==(const StepContent&) const = default;
};

StepContent first_step(const std::string& backend, int workers) {
  const WorkerTrace w = read_trace(run_ddp(backend, workers) / "trace.json").at(0);
  StepContent c;
  const std::vector<Span> steps = spans_named(w, "step 0");
  if (steps.empty()) return c;
  for (const Span& s : inside(w.spans, steps.front()))
    if (s.category != "comm") c.names.push_back(s.name);
  std::sort(c.names.begin(), c.names.end());  // zero-length spans tie with their neighbours
  for (const Flight& f : inside(w.flights, steps.front())) {
    c.sizes.push_back(f.bytes);
    c.algorithms.push_back(f.algorithm);
  }
  return c;
}

TEST(Trace, EveryBackendTracesTheSameContent) {
  const StepContent sim1 = first_step("sim", 1), local = first_step("local", 1);
  EXPECT_GT(sim1.names.size(), 8u);
  EXPECT_EQ(local.names, sim1.names);
  EXPECT_EQ(local.sizes, sim1.sizes);
  const StepContent sim2 = first_step("sim", 2), mpi = first_step("mpi", 2);
  EXPECT_EQ(sim2.sizes.size(), 3u);
  EXPECT_EQ(mpi, sim2);
}

// trace.workers and trace.steps select what is traced; trace.steps = 0 keeps the epoch outline.
TEST(Trace, SelectionKeysChooseWorkersAndSteps) {
  const fs::path one = run_ddp("sim", 2, "-selected", "--set trace.workers=1 --set trace.steps=0");
  const std::map<int, WorkerTrace> trace = read_trace(one / "trace.json");
  ASSERT_EQ(trace.size(), 1u);
  const WorkerTrace& w = trace.at(0);
  EXPECT_EQ(spans_named(w, "epoch ").size(), 2u);
  EXPECT_TRUE(spans_named(w, "step ").empty());
  EXPECT_TRUE(w.flights.empty());
}

// A large cost-only run writes a small trace: 16 workers by default, a few steps each.
TEST(Trace, ThousandWorkerRunTracesSixteenWorkers) {
  const fs::path out = syncopate::scratch_folder("trace") / "resnet50-1024";
  fs::remove_all(out);
  std::string log;
  ASSERT_EQ(syncopate::run_command(
                "cd " + std::string(SYNCOPATE_SOURCE_DIR) + " && " + kBin +
                    " run scenarios/sim-resnet50-ddp-1024.toml --set epochs=1 --quiet --out " +
                    out.string(),
                &log),
            0)
      << log;
  const std::map<int, WorkerTrace> trace = read_trace(out / "trace.json");
  EXPECT_EQ(trace.size(), 16u);
  EXPECT_EQ(trace.rbegin()->first, 15);
  EXPECT_EQ(spans_named(trace.at(15), "step ").size(), 3u);
  EXPECT_LT(fs::file_size(out / "trace.json"), 8u << 20);
}

}  // namespace
}  // namespace trace_test
