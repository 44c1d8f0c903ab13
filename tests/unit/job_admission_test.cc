// Per-job admission (daemon/engine/job_admission.h): what a job's ops hold against its caps,
// given back as they end or their session goes, and the refusals naming the job, the cap
// and the config key.
#include "daemon/engine/job_admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

namespace plexus::daemon {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::shared_ptr<Session> rank_session(uint64_t id, const std::shared_ptr<JobCounters>& job) {
  Session::Identity identity;
  identity.role = SessionRole::kRank;
  identity.job = job->job;
  identity.job_counters = job;
  return std::make_shared<Session>(id, PeerCredentials{}, std::move(identity));
}

TEST(JobAdmissionTest, AnOpIsChargedTheLargerOfItsBuffers) {
  shm::ValidatedEntry entry;
  entry.send.bytes = 100;
  entry.recv.bytes = 400;  // an allgather's result
  EXPECT_EQ(inflight_charge(entry), 400u);
  entry.recv.bytes = 0;  // a send
  EXPECT_EQ(inflight_charge(entry), 100u);
}

TEST(JobAdmissionTest, TheInFlightCapRefusesOnlyPastItNamingTheJobAndKey) {
  auto job = std::make_shared<JobCounters>("trainer", 1);
  auto a = rank_session(1, job);
  auto b = rank_session(2, job);
  EXPECT_EQ(refuse_inflight(*job, uint64_t{1} << 40), "") << "no cap: anything goes";
  job->max_inflight_bytes = 1000;
  charge_inflight(*a, 7, 600);
  charge_inflight(*b, 7, 300);  // the same user_data in another process
  EXPECT_EQ(job->inflight_bytes.load(), 900u);
  EXPECT_EQ(refuse_inflight(*job, 100), "") << "exactly at the cap is allowed";
  EXPECT_THAT(refuse_inflight(*job, 101),
              AllOf(HasSubstr("job 'trainer'"), HasSubstr("1001 bytes"), HasSubstr("cap of 1000"),
                    HasSubstr("[jobs.trainer] max_inflight_bytes")));
  EXPECT_THAT(refuse_inflight(*job, 5000), HasSubstr("this op 5000")) << "alone past the cap";
  discharge_inflight(*a, 7);
  EXPECT_EQ(job->inflight_bytes.load(), 300u);
  EXPECT_TRUE(a->ops_in_flight.empty());
  discharge_inflight(*a, 7);  // none left with that user_data: nothing to give back
  EXPECT_EQ(job->inflight_bytes.load(), 300u);
  EXPECT_EQ(refuse_inflight(*job, 700), "");
}

TEST(JobAdmissionTest, OpsSharingAUserDataGiveBackAllTheyTookAndAGoneSessionTheRest) {
  auto job = std::make_shared<JobCounters>("rollout", 1);
  auto s = rank_session(1, job);
  charge_inflight(*s, 5, 100);
  charge_inflight(*s, 5, 51);
  charge_inflight(*s, 6, 1000);
  EXPECT_EQ(s->inflight_bytes(), 1151u);
  discharge_inflight(*s, 5);  // half of 151, rounded down
  EXPECT_EQ(job->inflight_bytes.load(), 1151u - 75u);
  discharge_inflight(*s, 5);  // the rest
  EXPECT_EQ(job->inflight_bytes.load(), 1000u);
  EXPECT_EQ(s->ops_in_flight.count(5), 0u);
  auto other = rank_session(2, job);
  charge_inflight(*other, 1, 20);
  discharge_session(*s);  // op 6 never ended
  EXPECT_EQ(job->inflight_bytes.load(), 20u) << "only the gone session's bytes are given back";
  EXPECT_EQ(s->inflight_bytes(), 0u);
  EXPECT_TRUE(s->ops_in_flight.empty());
}

TEST(JobAdmissionTest, TheStagingCapCountsWhatAnOpGivesBack) {
  auto job = std::make_shared<JobCounters>("trainer", 1);
  EXPECT_EQ(refuse_staging(*job, 1 << 30, 0), "") << "no cap";
  job->max_staging_bytes = 1000;
  *job->staging_bytes = 800;
  EXPECT_EQ(refuse_staging(*job, 200, 0), "");
  EXPECT_THAT(
      refuse_staging(*job, 201, 0),
      AllOf(HasSubstr("needs 201 bytes"), HasSubstr("job 'trainer''s GPU ops"),
            HasSubstr("hold 800 of the 1000"), HasSubstr("[jobs.trainer] max_staging_bytes")));
  EXPECT_EQ(refuse_staging(*job, 201, 1), "") << "its own copy aside, given back first";
}

}  // namespace
}  // namespace plexus::daemon
