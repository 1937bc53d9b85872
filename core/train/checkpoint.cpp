// Checkpoint files: the framed, checksummed binary format and its atomic write.
#include "core/train/checkpoint.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <tuple>
#include <utility>

#include "core/base/bytes.hpp"
#include "core/base/check.hpp"

namespace syncopate {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "SYNCCKPT";
constexpr size_t kHeader = 8 + 4 + 8 + 8;  // magic, version, scenario hash, payload length

uint32_t crc32_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes lengths as uInt: feed it in pieces.
  for (size_t at = 0; at < bytes.size(); at += 1u << 30) {
    const size_t n = std::min<size_t>(bytes.size() - at, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

std::string payload_of(const WorkerCheckpoint& c) {
  ByteWriter w;
  w.put<int32_t>(c.worker);
  w.put<int32_t>(c.workers);
  w.put<int32_t>(c.next_epoch);
  w.put<int64_t>(c.global_step);
  w.put<int64_t>(c.optimizer_steps);
  w.put_span<double>(c.clock);
  for (double v : {c.phases.compute_s, c.phases.comm_s, c.phases.idle_s, c.phases.comm_total_s})
    w.put<double>(v);
  w.put_span<float>(c.params);
  w.put_span<float>(c.optimizer_state);
  w.put_string(c.strategy_state);
  w.put_string(c.report);
  w.put<uint64_t>(c.resizes.size());
  for (const Resize& r : c.resizes)
    for (const int v : {r.from, r.to, r.at_epoch}) w.put<int32_t>(v);
  w.put<int64_t>(c.next_step);
  w.put_string(c.epoch_state);
  return w.bytes();
}

// `version` 1 ends after the report.
WorkerCheckpoint parse_payload(std::string_view payload, const std::string& path,
                               uint32_t version) {
  ByteReader r(payload, path);
  WorkerCheckpoint c;
  c.worker = r.get<int32_t>();
  c.workers = r.get<int32_t>();
  c.next_epoch = r.get<int32_t>();
  c.global_step = r.get<int64_t>();
  c.optimizer_steps = r.get<int64_t>();
  c.clock = r.get_vector<double>();
  for (double* v :
       {&c.phases.compute_s, &c.phases.comm_s, &c.phases.idle_s, &c.phases.comm_total_s})
    *v = r.get<double>();
  c.params = r.get_vector<float>();
  c.optimizer_state = r.get_vector<float>();
  c.strategy_state = r.get_string();
  c.report = r.get_string();
  if (version >= 2) {
    const auto n = r.get<uint64_t>();
    if (n > payload.size()) throw UserError(path + ": corrupt checkpoint (resize count)");
    for (uint64_t i = 0; i < n; ++i) {
      Resize resize;
      for (int* v : {&resize.from, &resize.to, &resize.at_epoch}) *v = r.get<int32_t>();
      c.resizes.push_back(resize);
    }
    c.next_step = r.get<int64_t>();
    c.epoch_state = r.get_string();
  }
  if (!r.done()) throw UserError(path + ": corrupt checkpoint (bytes after the payload)");
  return c;
}

template <typename T>
T field_at(std::string_view bytes, size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// The resolved TOML without the lines of table `table` ("" for the top-level keys, which come
// before the first table) that start with `start`.
std::string without_lines(std::string_view toml, std::string_view table, std::string_view start) {
  std::string out;
  bool in_table = table.empty();
  for (size_t at = 0; at < toml.size();) {
    const size_t end = std::min(toml.find('\n', at), toml.size());
    const std::string_view line = toml.substr(at, end + 1 - at);
    if (line.starts_with('['))
      in_table = line.substr(1, table.size()) == table && line.substr(1 + table.size()) == "]\n";
    if (!(in_table && line.starts_with(start))) out += line;
    at = end + 1;
  }
  return out;
}

// Version 1 hashed the whole resolved scenario of its time, which had no checkpoint.every_steps.
uint64_t scenario_hash_of_version(const Scenario& scenario, uint32_t version) {
  if (version == 1)
    return fnv1a(without_lines(scenario.resolved_toml, "checkpoint", "every_steps = 0\n"));
  return fnv1a(without_lines(scenario.resolved_toml, "", "workers = "));
}

// The file's bytes; UserError naming it when it cannot be read.
std::string bytes_of_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UserError(path + ": no checkpoint there (cannot open)");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string encode_checkpoint(const Scenario& scenario, const WorkerCheckpoint& checkpoint) {
  const std::string payload = payload_of(checkpoint);
  ByteWriter w;
  std::string bytes(kMagic);
  w.put<uint32_t>(kCheckpointVersion);
  w.put<uint64_t>(scenario_hash(scenario));
  w.put<uint64_t>(payload.size());
  bytes += w.bytes();
  bytes += payload;
  const uint32_t crc = crc32_of(bytes);
  bytes.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  return bytes;
}

WorkerCheckpoint decode_checkpoint(std::string_view bytes, const std::string& path,
                                   const Scenario& scenario) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, 8) != kMagic)
    throw UserError(path + ": not a syncopate checkpoint (no SYNCCKPT magic)");
  if (bytes.size() < kHeader + 4) throw UserError(path + ": truncated checkpoint");
  const auto version = field_at<uint32_t>(bytes, 8);
  if (version > kCheckpointVersion)
    throw UserError(path + ": checkpoint format version " + std::to_string(version) +
                    " is newer than this program's (" + std::to_string(kCheckpointVersion) +
                    "); resume it with the syncopate that wrote it");
  if (version < 1)
    throw UserError(path + ": checkpoint format version " + std::to_string(version) +
                    " is not supported (this program reads versions 1 to " +
                    std::to_string(kCheckpointVersion) + ")");
  const auto length = field_at<uint64_t>(bytes, 20);
  if (bytes.size() != kHeader + length + 4)
    throw UserError(path + ": truncated checkpoint (" + std::to_string(bytes.size()) +
                    " bytes, the header announces " + std::to_string(kHeader + length + 4) + ")");
  const std::string_view body = bytes.substr(0, kHeader + length);
  if (crc32_of(body) != field_at<uint32_t>(bytes, kHeader + length))
    throw UserError(path + ": corrupt checkpoint (CRC-32 mismatch)");
  if (field_at<uint64_t>(bytes, 12) != scenario_hash_of_version(scenario, version))
    throw UserError(path + ": checkpoint of another scenario (its resolved scenario differs " +
                    "from this run's " + scenario.source + ")");
  return parse_payload(body.substr(kHeader), path, version);
}

}  // namespace

uint64_t scenario_hash(const Scenario& scenario) {
  return scenario_hash_of_version(scenario, kCheckpointVersion);
}

std::string checkpoint_path(const std::string& run_dir, int worker) {
  return (fs::path(run_dir) / "checkpoint" / ("worker-" + std::to_string(worker) + ".ckpt"))
      .string();
}

namespace {

// Writes all of `bytes` to fd; false (errno set) when it cannot.
bool write_all(int fd, std::string_view bytes) {
  for (size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

// fsync of the folder, so that a rename in it is durable.
void sync_folder(const fs::path& folder) {
  if (const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

void write_atomically(const fs::path& path, const std::string& bytes) {
  const fs::path temporary = path.string() + ".tmp";
  const auto fail = [&](const char* what) {
    throw UserError(temporary.string() + ": cannot " + what + ": " + std::strerror(errno));
  };
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create");
  if (!write_all(fd, bytes)) {
    ::close(fd);
    fail("write");
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("fsync");
  }
  if (::close(fd) != 0) fail("close");
  fs::rename(temporary, path);
  sync_folder(path.parent_path());
}

void write_run_scenario(const std::string& run_dir, const Scenario& scenario) {
  write_atomically(fs::path(run_dir) / "scenario.toml", scenario.resolved_toml);
}

void write_checkpoint(const std::string& path, const Scenario& scenario,
                      const WorkerCheckpoint& checkpoint) {
  fs::create_directories(fs::path(path).parent_path());
  write_atomically(path, encode_checkpoint(scenario, checkpoint));
}

WorkerCheckpoint read_checkpoint(const std::string& path, const Scenario& scenario) {
  return decode_checkpoint(bytes_of_file(path), path, scenario);
}

namespace {

std::string previous_path(const std::string& run_dir, int worker) {
  return (fs::path(run_dir) / "checkpoint" /
          ("worker-" + std::to_string(worker) + ".previous.ckpt"))
      .string();
}

// Worker w's checkpoints (the latest first; none when it has no file), checked to be worker w's.
std::vector<WorkerCheckpoint> checkpoints_of(const std::string& run_dir, const Scenario& s, int w) {
  std::vector<WorkerCheckpoint> found;
  for (const std::string& path : {checkpoint_path(run_dir, w), previous_path(run_dir, w)}) {
    if (!fs::exists(path)) continue;
    WorkerCheckpoint c = read_checkpoint(path, s);
    if (c.worker != w || c.worker >= c.workers)
      throw UserError(path + ": checkpoint of worker " + std::to_string(c.worker) + " of " +
                      std::to_string(c.workers) + ", expected worker " + std::to_string(w));
    found.push_back(std::move(c));
  }
  return found;
}

// Whether checkpoint c belongs to the set of `head`: as many workers, at the same point.
bool in_set(const WorkerCheckpoint& c, const WorkerCheckpoint& head) {
  return c.workers == head.workers && c.next_epoch == head.next_epoch &&
         c.next_step == head.next_step;
}

// The set of every worker's checkpoint of worker 0's candidate `head`, if complete.
std::vector<WorkerCheckpoint> set_of(const WorkerCheckpoint& head,
                                     std::vector<std::vector<WorkerCheckpoint>>& all) {
  std::vector<WorkerCheckpoint> set;
  if (static_cast<size_t>(head.workers) > all.size()) return set;  // a worker has no file
  for (int w = 0; w < head.workers; ++w)
    for (const WorkerCheckpoint& c : all[static_cast<size_t>(w)])
      if (in_set(c, head)) {
        set.push_back(c);
        break;
      }
  if (set.size() != static_cast<size_t>(head.workers)) set.clear();
  return set;
}

// No complete set: name the worker that lags (as many workers as worker 0's latest checkpoint).
[[noreturn]] void no_resume_set(const std::string& run_dir,
                                const std::vector<std::vector<WorkerCheckpoint>>& all) {
  const int workers = all[0].front().workers;
  int epoch = INT32_MAX, lagging = 0;
  for (int w = 0; w < workers; ++w) {
    if (static_cast<size_t>(w) >= all.size() || all[static_cast<size_t>(w)].empty())
      throw UserError(checkpoint_path(run_dir, w) + ": no checkpoint there");
    const auto& mine = all[static_cast<size_t>(w)];
    int latest = 0;
    for (const WorkerCheckpoint& c : mine) latest = std::max(latest, c.next_epoch);
    if (latest < epoch) std::tie(epoch, lagging) = std::pair(latest, w);
  }
  throw UserError(checkpoint_path(run_dir, lagging) + ": no checkpoint after epoch " +
                  std::to_string(epoch) +
                  " (the workers' checkpoints are more than one epoch apart)");
}

}  // namespace

void write_worker_checkpoint(const std::string& run_dir, const Scenario& scenario,
                             const WorkerCheckpoint& checkpoint) {
  const std::string path = checkpoint_path(run_dir, checkpoint.worker);
  if (fs::exists(path)) fs::rename(path, previous_path(run_dir, checkpoint.worker));
  write_checkpoint(path, scenario, checkpoint);
}

namespace {

// read_resume_set from the files of each worker.
std::vector<WorkerCheckpoint> read_worker_files(const std::string& run_dir,
                                                const Scenario& scenario) {
  std::vector<std::vector<WorkerCheckpoint>> all{checkpoints_of(run_dir, scenario, 0)};
  if (all[0].empty()) throw UserError(checkpoint_path(run_dir, 0) + ": no checkpoint there");
  int most = 0;  // the largest worker count among worker 0's checkpoints
  for (const WorkerCheckpoint& c : all[0]) most = std::max(most, c.workers);
  // Up to the first worker with no file: no set of more workers is complete (and a damaged
  // count of millions costs no more than the files there are).
  for (int w = 1; w < most; ++w) {
    all.push_back(checkpoints_of(run_dir, scenario, w));
    if (all.back().empty()) break;
  }
  std::vector<const WorkerCheckpoint*> heads;  // worker 0's, the latest epoch first
  for (const WorkerCheckpoint& c : all[0]) heads.push_back(&c);
  std::stable_sort(heads.begin(), heads.end(), [](const auto* a, const auto* b) {
    return std::pair(a->next_epoch, a->next_step) > std::pair(b->next_epoch, b->next_step);
  });
  for (const WorkerCheckpoint* head : heads)
    if (std::vector<WorkerCheckpoint> set = set_of(*head, all); !set.empty()) return set;
  no_resume_set(run_dir, all);
}

constexpr std::string_view kSetMagic = "SYNCCSET";
constexpr size_t kSetHeader = 8 + 4;  // magic, set format version

std::string set_header() {
  ByteWriter w;
  w.put<uint32_t>(kCheckpointSetVersion);
  return std::string(kSetMagic) + w.bytes();
}

std::string set_record(const Scenario& scenario, const WorkerCheckpoint& checkpoint) {
  const std::string bytes = encode_checkpoint(scenario, checkpoint);
  ByteWriter w;
  w.put<uint64_t>(bytes.size());
  return w.bytes() + bytes;
}

std::pair<int64_t, int64_t> point_of(const WorkerCheckpoint& c) {
  return {c.next_epoch, c.next_step};
}

}  // namespace

std::string checkpoint_set_path(const std::string& run_dir) {
  return (fs::path(run_dir) / "checkpoint" / "workers.ckpt").string();
}

std::vector<WorkerCheckpoint> read_checkpoint_set(const std::string& path,
                                                  const Scenario& scenario) {
  const std::string file = bytes_of_file(path);
  const std::string_view bytes = file;
  if (bytes.size() < kSetMagic.size() || bytes.substr(0, 8) != kSetMagic)
    throw UserError(path + ": not a syncopate checkpoint set (no SYNCCSET magic)");
  if (bytes.size() < kSetHeader) throw UserError(path + ": truncated checkpoint set");
  const auto version = field_at<uint32_t>(bytes, 8);
  if (version != kCheckpointSetVersion)
    throw UserError(path + ": checkpoint set format version " + std::to_string(version) +
                    (version > kCheckpointSetVersion
                         ? " is newer than this program's (" +
                               std::to_string(kCheckpointSetVersion) +
                               "); resume it with the syncopate that wrote it"
                         : " is not supported (this program reads version " +
                               std::to_string(kCheckpointSetVersion) + ")"));
  std::vector<WorkerCheckpoint> set;
  for (size_t at = kSetHeader; at < bytes.size();) {
    const std::string record = path + " (record " + std::to_string(set.size()) + ")";
    if (bytes.size() - at < 8) throw UserError(record + ": truncated checkpoint (no length)");
    const auto length = field_at<uint64_t>(bytes, at);
    at += 8;
    if (length > bytes.size() - at)
      throw UserError(record + ": truncated checkpoint (" + std::to_string(bytes.size() - at) +
                      " bytes left, the record announces " + std::to_string(length) + ")");
    set.push_back(decode_checkpoint(bytes.substr(at, length), record, scenario));
    at += length;
  }
  if (set.empty()) throw UserError(path + ": empty checkpoint set");
  std::sort(set.begin(), set.end(), [](const WorkerCheckpoint& a, const WorkerCheckpoint& b) {
    return a.worker < b.worker;
  });
  const WorkerCheckpoint& head = set.front();
  for (size_t w = 0; w < set.size(); ++w)
    if (set[w].worker != static_cast<int>(w) || !in_set(set[w], head))
      throw UserError(path + ": not one checkpoint set (record of worker " +
                      std::to_string(set[w].worker) + " of " + std::to_string(set[w].workers) +
                      " before epoch " + std::to_string(set[w].next_epoch) + ", expected worker " +
                      std::to_string(w) + " of " + std::to_string(head.workers) + " before epoch " +
                      std::to_string(head.next_epoch) + ")");
  if (set.size() != static_cast<size_t>(head.workers))
    throw UserError(path + ": incomplete checkpoint set (" + std::to_string(set.size()) + " of " +
                    std::to_string(head.workers) + " workers)");
  return set;
}

void write_checkpoint_set(const std::string& run_dir, const Scenario& scenario,
                          const std::vector<WorkerCheckpoint>& set) {
  std::string bytes = set_header();
  for (const WorkerCheckpoint& c : set) bytes += set_record(scenario, c);
  const std::string path = checkpoint_set_path(run_dir);
  fs::create_directories(fs::path(path).parent_path());
  write_atomically(path, bytes);
}

bool has_checkpoints(const std::string& run_dir, int workers) {
  if (fs::exists(checkpoint_set_path(run_dir))) return true;
  for (int w = 0; w < workers; ++w)
    if (!fs::exists(checkpoint_path(run_dir, w))) return false;
  return true;
}

std::vector<WorkerCheckpoint> read_resume_set(const std::string& run_dir,
                                              const Scenario& scenario) {
  const std::string set_path = checkpoint_set_path(run_dir);
  if (!fs::exists(set_path)) return read_worker_files(run_dir, scenario);
  std::vector<WorkerCheckpoint> set = read_checkpoint_set(set_path, scenario);
  if (!fs::exists(checkpoint_path(run_dir, 0)) && !fs::exists(previous_path(run_dir, 0)))
    return set;
  try {
    std::vector<WorkerCheckpoint> own = read_worker_files(run_dir, scenario);
    if (point_of(own.front()) > point_of(set.front())) return own;
  } catch (const UserError&) {  // the set file stands
  }
  return set;
}

SharedCheckpoints::SharedCheckpoints(std::string run_dir) : dir_(std::move(run_dir)) {
  const fs::path folder = fs::path(dir_) / "checkpoint";
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error))
    if (entry.path().filename().string().starts_with("workers-") &&
        entry.path().extension() == ".tmp")
      fs::remove(entry.path(), error);
}

SharedCheckpoints::~SharedCheckpoints() {
  for (auto& [point, pending] : pending_) {
    ::close(pending.fd);
    std::error_code error;
    fs::remove(pending.path, error);
  }
}

void SharedCheckpoints::add(const Scenario& scenario, const WorkerCheckpoint& checkpoint) {
  const std::string record = set_record(scenario, checkpoint);
  const std::lock_guard lock(mu_);
  const auto point = std::tuple(checkpoint.workers, checkpoint.next_epoch, checkpoint.next_step);
  Pending& pending = pending_[point];
  const auto fail = [&](const char* what) {
    const std::string message = pending.path + ": cannot " + what + ": " + std::strerror(errno);
    if (pending.fd >= 0) ::close(pending.fd);
    pending_.erase(point);
    throw UserError(message);
  };
  if (pending.fd < 0) {
    const fs::path folder = fs::path(dir_) / "checkpoint";
    fs::create_directories(folder);
    pending.path = (folder / ("workers-" + std::to_string(checkpoint.workers) + "-e" +
                              std::to_string(checkpoint.next_epoch) + "-s" +
                              std::to_string(checkpoint.next_step) + ".ckpt.tmp"))
                       .string();
    pending.fd = ::open(pending.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (pending.fd < 0) fail("create");
    if (!write_all(pending.fd, set_header())) fail("write");
  }
  if (!write_all(pending.fd, record)) fail("write");
  if (++pending.added < checkpoint.workers) return;
  if (::fsync(pending.fd) != 0) fail("fsync");
  const int fd = std::exchange(pending.fd, -1);
  if (::close(fd) != 0) fail("close");
  const std::string path = checkpoint_set_path(dir_);
  fs::rename(pending.path, path);
  pending_.erase(point);
  sync_folder(fs::path(path).parent_path());
}

std::shared_ptr<const std::vector<WorkerCheckpoint>> SharedCheckpoints::resume_set(
    const Scenario& scenario) {
  const std::lock_guard lock(mu_);
  if (!resume_set_)
    resume_set_ =
        std::make_shared<const std::vector<WorkerCheckpoint>>(read_resume_set(dir_, scenario));
  std::shared_ptr<const std::vector<WorkerCheckpoint>> set = resume_set_;
  if (++resume_readers_ >= scenario.workers) resume_set_.reset();
  return set;
}

namespace {

std::atomic<bool> stop_flag{false};

extern "C" void on_stop_signal(int) { stop_flag.store(true); }

// One mutex, not lock-free atomics: recording, reading and latching must be one step (StopLatch),
// and a step's worth of work lies between two calls of one worker.
class ProcessStopLatch final : public StopLatch {
 public:
  int64_t latch(StopUnit unit, int64_t done, int workers, bool signalled) override {
    const std::lock_guard lock(mu_);
    StopRecord& r = records_[static_cast<size_t>(unit)];
    r.record(done, workers, signalled);
    return r.latched;
  }

 private:
  std::mutex mu_;
  std::array<StopRecord, 2> records_;  // by StopUnit
};

}  // namespace

void install_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_RESETHAND;  // a second signal: the default action
  for (const int signal : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2}) sigaction(signal, &action, nullptr);
}

bool stop_signalled() { return stop_flag.load(); }

StopLatch& process_stop_latch() {
  static ProcessStopLatch latch;
  return latch;
}

}  // namespace syncopate
