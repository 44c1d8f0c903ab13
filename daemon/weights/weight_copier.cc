#include "daemon/weights/weight_copier.h"

#include <algorithm>
#include <cstring>

namespace plexus::daemon::weights {

namespace {

// Pieces a copy is cut into for the workers: large enough that a piece costs far more than
// handing it out, small enough that uneven workers balance.
constexpr size_t kPieceBytes = 8 << 20;

}  // namespace

WeightCopier::~WeightCopier() { stop(); }

void WeightCopier::copy(CopyJob job) {
  std::lock_guard lock(mutex_);
  jobs_.push_back(std::move(job));
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  ready_.notify_one();
}

void WeightCopier::stop() {
  std::deque<CopyJob> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(jobs_);
    ready_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void WeightCopier::loop() {
  for (;;) {
    CopyJob job;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_ || jobs_.empty()) break;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const std::string failure = run(job);
    std::function<void(const std::string&)> done = std::move(job.done);
    job =
        CopyJob{};  // the memory is let go before its owner hears (a version dropped then frees it)
    if (done) done(failure);
  }
  pool_.reset();
}

std::string WeightCopier::run(const CopyJob& job) {
  // Held while copying: a pool stays mapped until the copy is over.
  const std::shared_ptr<const void> client = job.client.lock();
  if (!client) return kClientGone;
  // Every span cut into pieces; the pieces shared out.
  struct Piece {
    const CopySpan* span;
    size_t offset;
  };
  std::vector<Piece> pieces;
  for (const CopySpan& span : job.spans) {
    for (size_t offset = 0; offset < span.bytes; offset += kPieceBytes) {
      pieces.push_back({&span, offset});
    }
  }
  auto copy_piece = [&pieces](size_t i) {
    const Piece& p = pieces[i];
    const size_t n = std::min(kPieceBytes, p.span->bytes - p.offset);
    std::memcpy(p.span->to + p.offset, p.span->from + p.offset, n);
  };
  if (workers_ == 0 || pieces.size() < 2) {
    for (size_t i = 0; i < pieces.size(); ++i) copy_piece(i);
  } else {
    if (!pool_) pool_ = std::make_unique<WorkerPool>(workers_);
    pool_->parallel_for(pieces.size(), copy_piece);
  }
  for (const auto& device_copy : job.device_copies) {
    if (std::string failed = device_copy(); !failed.empty()) return failed;
  }
  return {};
}

}  // namespace plexus::daemon::weights
