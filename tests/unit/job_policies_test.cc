// The jobs table (config file and --job) and JobPolicies: who may be set, and the shares it
// works out from what the send schedulers report.
#include "daemon/engine/job_policies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/jobs_table.h"

namespace plexus::daemon {
namespace {

using ::testing::HasSubstr;
using transports::FlowPolicy;
using transports::TrafficClass;

TEST(JobsTableTest, ReadsEachJobsClassAndWeightAndIgnoresOtherSections) {
  JobsTable table;
  EXPECT_EQ(read_jobs_table({{{"jobs", "trainer"}, "class", "bulk"},
                             {{"jobs", "trainer"}, "weight", "3"},
                             {{"jobs", "rollout"}, "class", "latency"},
                             {{"telemetry"}, "window_us", "1000"}},
                            &table),
            "");
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table["trainer"].policy.traffic_class, TrafficClass::kBulk);
  EXPECT_EQ(table["trainer"].policy.weight, 3u);
  EXPECT_EQ(table["rollout"].policy.traffic_class, TrafficClass::kLatency);
  EXPECT_EQ(table["rollout"].policy.weight, FlowPolicy{}.weight);
}

TEST(JobsTableTest, RefusesUnknownKeysClassesAndBadWeightsNamingTheJob) {
  JobsTable table;
  EXPECT_THAT(read_jobs_table({{{"jobs", "a"}, "colour", "red"}}, &table),
              AllOf(HasSubstr("a"), HasSubstr("colour")));
  EXPECT_THAT(read_jobs_table({{{"jobs", "b"}, "class", "fast"}}, &table),
              AllOf(HasSubstr("b"), HasSubstr("fast"), HasSubstr("latency, bulk, background")));
  for (const char* weight : {"0", "1001", "x", "-2", "3.5", ""}) {
    EXPECT_THAT(read_jobs_table({{{"jobs", "c"}, "weight", weight}}, &table),
                AllOf(HasSubstr("c"), HasSubstr("weight")))
        << weight;
  }
}

TEST(JobsTableTest, ParsesTheCommandLineForm) {
  JobsTable table;
  EXPECT_EQ(parse_job_option("trainer=bulk:3", &table), "");
  EXPECT_EQ(parse_job_option("probe=background", &table), "");
  EXPECT_EQ(table["trainer"].policy.weight, 3u);
  EXPECT_EQ(table["probe"].policy.traffic_class, TrafficClass::kBackground);
  EXPECT_EQ(table["probe"].policy.weight, FlowPolicy{}.weight);
  for (const char* bad : {"trainer", "=bulk", "trainer=", "trainer=fast", "trainer=bulk:0",
                          "trainer=bulk:two", "trainer=bulk:3:4"}) {
    EXPECT_NE(parse_job_option(bad, &table), "") << bad;
  }
}

TEST(JobsTableTest, ReadsEachJobsCapsAndRefusesBadOnesNamingTheJobAndKey) {
  JobsTable table;
  EXPECT_EQ(read_jobs_table({{{"jobs", "trainer"}, "max_inflight_bytes", "1048576"},
                             {{"jobs", "trainer"}, "max_staging_bytes", "0"},
                             {{"jobs", "rollout"}, "max_staging_bytes", "4096"}},
                            &table),
            "");
  EXPECT_EQ(table["trainer"].caps, (JobCaps{1048576, 0}));
  EXPECT_EQ(table["rollout"].caps, (JobCaps{0, 4096}));
  EXPECT_EQ(table["rollout"].policy, FlowPolicy{}) << "a caps-only job keeps the default policy";
  // --job sets the policy and keeps the file's caps.
  EXPECT_EQ(parse_job_option("trainer=latency", &table), "");
  EXPECT_EQ(table["trainer"].caps.max_inflight_bytes, 1048576u);
  EXPECT_EQ(table["trainer"].policy.traffic_class, TrafficClass::kLatency);
  for (const char* key : {"max_inflight_bytes", "max_staging_bytes"}) {
    for (const char* bad : {"-1", " -1", "+5", " 5", "1e6", "x", "", "99999999999999999999999"}) {
      EXPECT_THAT(read_jobs_table({{{"jobs", "d"}, key, bad}}, &table),
                  AllOf(HasSubstr("job 'd'"), HasSubstr(key), HasSubstr("whole number of bytes")))
          << key << " = " << bad;
    }
  }
}

JobsTable with_policies(const std::map<std::string, FlowPolicy>& policies) {
  JobsTable table;
  for (const auto& [job, policy] : policies) table[job].policy = policy;
  return table;
}

NodeLinks::Handler quiet_handler() {
  NodeLinks::Handler handler;
  handler.on_frame = [](uint64_t, const auto&, auto) { return std::string(); };
  handler.on_lost = [](uint64_t, const std::string&, const std::string&) {};
  return handler;
}

TEST(JobPoliciesTest, AJobNeitherConfiguredNorSeenIsRefusedNamingTheKnownOnes) {
  NodeLinks links(quiet_handler());
  JobPolicies policies(links, with_policies({{"trainer", FlowPolicy{TrafficClass::kBulk, 3}}}));
  EXPECT_THAT(policies.set("nope", {}),
              AllOf(HasSubstr("unknown job 'nope'"), HasSubstr("known: trainer")));
  auto rollout = std::make_shared<JobCounters>("rollout", 2);
  policies.job_seen(rollout);
  EXPECT_THAT(policies.set("nope", {}), HasSubstr("known: trainer, rollout"));
  // A configured job may be set before any session of it has connected.
  EXPECT_EQ(policies.set("trainer", FlowPolicy{TrafficClass::kLatency, 1}), "");
}

TEST(JobPoliciesTest, ASeenJobGetsItsConfiguredPolicyAndRunTimeChangesApply) {
  NodeLinks links(quiet_handler());
  JobPolicies policies(links, with_policies({{"trainer", FlowPolicy{TrafficClass::kBulk, 3}}}));
  auto trainer = std::make_shared<JobCounters>("trainer", 1);
  auto other = std::make_shared<JobCounters>("other", 2);
  policies.job_seen(trainer);
  policies.job_seen(other);
  EXPECT_EQ(trainer->policy().weight, 3u);
  EXPECT_EQ(other->policy().traffic_class, FlowPolicy{}.traffic_class);
  EXPECT_EQ(policies.set("other", FlowPolicy{TrafficClass::kBackground, 7}), "");
  EXPECT_EQ(other->policy().traffic_class, TrafficClass::kBackground);
  EXPECT_EQ(other->policy().weight, 7u);
}

TEST(JobPoliciesTest, ASeenJobGetsItsConfiguredCapsAndOthersNone) {
  NodeLinks links(quiet_handler());
  JobsTable table;
  table["capped"].caps = {1000, 2000};
  JobPolicies policies(links, table);
  auto capped = std::make_shared<JobCounters>("capped", 1);
  auto free = std::make_shared<JobCounters>("free", 2);
  policies.job_seen(capped);
  policies.job_seen(free);
  EXPECT_EQ(capped->max_inflight_bytes.load(), 1000u);
  EXPECT_EQ(capped->max_staging_bytes.load(), 2000u);
  EXPECT_EQ(free->max_inflight_bytes.load(), 0u);
  EXPECT_EQ(free->max_staging_bytes.load(), 0u);
  // A run-time policy change keeps the caps.
  EXPECT_EQ(policies.set("capped", FlowPolicy{TrafficClass::kLatency, 2}), "");
  EXPECT_EQ(capped->max_inflight_bytes.load(), 1000u);
}

TEST(JobPoliciesTest, AReloadedTableChangesOnlyTheJobsWhoseEntriesChanged) {
  NodeLinks links(quiet_handler());
  JobsTable table = with_policies({{"kept", FlowPolicy{TrafficClass::kBulk, 3}},
                                   {"changed", FlowPolicy{TrafficClass::kBulk, 1}},
                                   {"dropped", FlowPolicy{TrafficClass::kBackground, 4}}});
  table["dropped"].caps = {1000, 0};
  JobPolicies policies(links, table);
  auto kept = std::make_shared<JobCounters>("kept", 1);
  auto changed = std::make_shared<JobCounters>("changed", 2);
  auto dropped = std::make_shared<JobCounters>("dropped", 3);
  for (const auto& job : {kept, changed, dropped}) policies.job_seen(job);
  // Set at run time: a reload that leaves its entry alone keeps it.
  EXPECT_EQ(policies.set("kept", FlowPolicy{TrafficClass::kLatency, 9}), "");
  const uint64_t version = policies.version();
  JobsTable reloaded = with_policies({{"kept", FlowPolicy{TrafficClass::kBulk, 3}},
                                      {"changed", FlowPolicy{TrafficClass::kLatency, 5}}});
  reloaded["changed"].caps = {0, 4096};
  policies.reconfigure(reloaded);
  EXPECT_EQ(kept->policy().traffic_class, TrafficClass::kLatency);
  EXPECT_EQ(kept->policy().weight, 9u);
  EXPECT_EQ(changed->policy().traffic_class, TrafficClass::kLatency);
  EXPECT_EQ(changed->policy().weight, 5u);
  EXPECT_EQ(changed->max_staging_bytes.load(), 4096u);
  // Out of the table: the default policy and no caps.
  EXPECT_EQ(dropped->policy().traffic_class, FlowPolicy{}.traffic_class);
  EXPECT_EQ(dropped->max_inflight_bytes.load(), 0u);
  EXPECT_GT(policies.version(), version) << "the engine must re-sort its sessions by class";
}

TEST(JobPoliciesTest, SharesAreTheWindowsBytesAndTheWeightsAmongJobsOfAClassThatSent) {
  NodeLinks links(quiet_handler());
  JobPolicies policies(links, with_policies({{"heavy", FlowPolicy{TrafficClass::kBulk, 3}},
                                             {"light", FlowPolicy{TrafficClass::kBulk, 1}},
                                             {"small", FlowPolicy{TrafficClass::kLatency, 1}},
                                             {"idle", FlowPolicy{TrafficClass::kBulk, 4}}}));
  auto heavy = std::make_shared<JobCounters>("heavy", 1);
  auto light = std::make_shared<JobCounters>("light", 2);
  auto small = std::make_shared<JobCounters>("small", 3);
  auto idle = std::make_shared<JobCounters>("idle", 4);
  for (const auto& job : {heavy, light, small, idle}) policies.job_seen(job);
  auto now = JobPolicies::Clock::now();
  policies.update_shares(now);  // opens the first window
  policies.scheduled(1, 600, std::chrono::microseconds(10));
  policies.scheduled(2, 300, std::chrono::microseconds(30));
  policies.scheduled(3, 100, std::chrono::microseconds(1));
  policies.scheduled(9, 5000, std::chrono::microseconds(1));  // no such flow: ignored
  now += JobPolicies::kShareWindow;
  policies.update_shares(now);
  EXPECT_DOUBLE_EQ(heavy->achieved_share.load(), 0.6);
  EXPECT_DOUBLE_EQ(light->achieved_share.load(), 0.3);
  EXPECT_DOUBLE_EQ(small->achieved_share.load(), 0.1);
  // Idle sent nothing: its weight does not count against heavy and light.
  EXPECT_DOUBLE_EQ(heavy->configured_share.load(), 0.75);
  EXPECT_DOUBLE_EQ(light->configured_share.load(), 0.25);
  EXPECT_DOUBLE_EQ(small->configured_share.load(), 1.0);
  EXPECT_DOUBLE_EQ(idle->configured_share.load(), 0.0);
  EXPECT_EQ(heavy->scheduled_bytes.load(), 600u);
  EXPECT_EQ(light->queue_delay.snapshot().count, 1u);
  // The next window starts from zero: only what was scheduled in it counts.
  policies.scheduled(2, 100, std::chrono::microseconds(1));
  now += JobPolicies::kShareWindow;
  policies.update_shares(now);
  EXPECT_DOUBLE_EQ(light->achieved_share.load(), 1.0);
  EXPECT_DOUBLE_EQ(heavy->achieved_share.load(), 0.0);
  EXPECT_DOUBLE_EQ(light->configured_share.load(), 1.0);
  // Less than a window later: nothing is worked out yet.
  policies.scheduled(1, 100, std::chrono::microseconds(1));
  policies.update_shares(now + JobPolicies::kShareWindow / 2);
  EXPECT_DOUBLE_EQ(light->achieved_share.load(), 1.0);
}

}  // namespace
}  // namespace plexus::daemon
