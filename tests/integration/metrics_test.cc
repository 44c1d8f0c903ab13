// The Prometheus exporter against a real plexusd: a scrape counts exactly what a job did,
// passes promtool's checks, and a real Prometheus server (started here on loopback)
// scrapes the daemon and answers a query for it.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/integration/command_output.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/http_get.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/test_data.h"

namespace plexus::test {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// The URL plexusd logged ("metrics at http://127.0.0.1:PORT/metrics"); it comes just
// after the socket appears, so wait for it a little.
std::string metrics_url(const DaemonProcess& daemon) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    std::smatch match;
    const std::string log = daemon.log();
    if (std::regex_search(log, match, std::regex("metrics at (http://[0-9.:]+/metrics)"))) {
      return match[1];
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {};
}

// Runs `body` as `nranks` ranks with PLEXUS_JOB=job.
std::string run_job(const std::string& socket, const std::string& job, int nranks,
                    const RankBody& body) {
  ::setenv("PLEXUS_JOB", job.c_str(), 1);
  auto results = run_ranks(socket, nranks, body);
  ::unsetenv("PLEXUS_JOB");
  return failures(results);
}

// Each rank: 7 allreduces of 1024 floats and 3 broadcasts of 256 int32 from rank 0.
std::string allreduces_and_broadcasts(int rank, int n, const plexus_unique_id_t& id) {
  plexus_comm_t comm;
  if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
  float* buf;
  if (auto r = plexus_alloc(reinterpret_cast<void**>(&buf), 1024 * sizeof(float))) {
    return describe("alloc", r);
  }
  for (int i = 0; i < 7; ++i) {
    if (auto r = plexus_allreduce(buf, buf, 1024, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr)) {
      return describe("allreduce", r);
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (auto r = plexus_broadcast(buf, buf, 256, PLEXUS_INT32, 0, comm, nullptr)) {
      return describe("broadcast", r);
    }
  }
  plexus_comm_destroy(comm);
  return {};
}

TEST(MetricsTest, AScrapeCountsWhatTheJobsDidAndPassesPromtool) {
  DaemonProcess daemon({"--node-name", "node-m"});
  const std::string url = metrics_url(daemon);
  ASSERT_FALSE(url.empty()) << "plexusd did not log its metrics URL:\n" << daemon.log();
  ASSERT_EQ(run_job(daemon.socket_path(), "train-7", 3, allreduces_and_broadcasts), "");
  // A job whose ranks disagree: each of its 2 ranks gets an error.
  ASSERT_EQ(run_job(daemon.socket_path(), "broken-job", 2,
                    [](int rank, int n, const plexus_unique_id_t& id) -> std::string {
                      plexus_comm_t comm;
                      if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) {
                        return describe("init", r);
                      }
                      float* buf;
                      plexus_alloc(reinterpret_cast<void**>(&buf), 1024 * sizeof(float));
                      const plexus_result_t r =
                          plexus_allreduce(buf, buf, rank == 0 ? 1024 : 512, PLEXUS_FLOAT32,
                                           PLEXUS_SUM, comm, nullptr);
                      plexus_comm_destroy(comm);
                      return r == PLEXUS_ERR_MISMATCH ? "" : "expected a mismatch";
                    }),
            "");

  const HttpReply reply = http_get(url);
  ASSERT_EQ(reply.status, 200) << url;
  const std::string& m = reply.body;
  auto job_series = [](const std::string& name, const std::string& job, const std::string& op) {
    return name + "{plexus_job=\"" + job + "\",collective=\"" + op + "\"}";
  };
  EXPECT_EQ(sample_value(m, job_series("plexus_ops_total", "train-7", "allreduce")), 7) << m;
  EXPECT_EQ(sample_value(m, job_series("plexus_ops_total", "train-7", "broadcast")), 3);
  EXPECT_EQ(sample_value(m, job_series("plexus_op_payload_bytes_total", "train-7", "allreduce")),
            7 * 4096);
  EXPECT_EQ(sample_value(m, job_series("plexus_op_payload_bytes_total", "train-7", "broadcast")),
            3 * 1024);
  EXPECT_EQ(sample_value(m, "plexus_failed_completions_total{plexus_job=\"train-7\"}"), 0);
  EXPECT_EQ(sample_value(m, "plexus_failed_completions_total{plexus_job=\"broken-job\"}"), 2);
  EXPECT_EQ(sample_value(m, job_series("plexus_ops_total", "broken-job", "allreduce")), -1)
      << "a failed op is not counted as run";
  EXPECT_EQ(sample_value(m, "plexus_ops_completed_total"), 10);
  // Durations: every op in a bucket, +Inf holds them all.
  EXPECT_EQ(sample_value(m, "plexus_op_duration_seconds_count{collective=\"allreduce\"}"), 7);
  EXPECT_EQ(
      sample_value(m, "plexus_op_duration_seconds_bucket{collective=\"allreduce\",le=\"+Inf\"}"),
      7);
  EXPECT_GT(sample_value(m, "plexus_op_duration_seconds_sum{collective=\"allreduce\"}"), 0);
  EXPECT_THAT(m, HasSubstr("plexus_build_info{version="));
  EXPECT_THAT(m, HasSubstr("node=\"node-m\""));
  EXPECT_EQ(sample_value(m, "plexus_communicators{state=\"broken\"}") +
                    sample_value(m, "plexus_communicators{state=\"ready\"}") >=
                0,
            true);
  EXPECT_EQ(sample_value(m, "plexus_bad_control_messages_total"), 0);

  // promtool (Debian package prometheus) checks the format and the naming rules.
  if (run_command({"sh", "-c", "command -v promtool"}).exit_code != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus; tools/install-deps.sh "
                    "installs it): the format check did not run";
  }
  const std::string file = "/tmp/plexus-metrics-" + std::to_string(::getpid()) + ".txt";
  std::ofstream(file) << m;
  const CommandOutput check = run_command({"sh", "-c", "promtool check metrics < " + file});
  std::filesystem::remove(file);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

// A free TCP port on loopback (bound, read, released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A Prometheus server scraping one target every second, in a temp directory removed after.
class PrometheusServer {
 public:
  explicit PrometheusServer(const std::string& target) {
    char pattern[] = "/tmp/plexus-prometheus-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    port_ = free_port();
    std::ofstream(dir_ + "/prometheus.yml")
        << "global:\n  scrape_interval: 1s\n"
        << "scrape_configs:\n  - job_name: plexus\n    static_configs:\n"
        << "      - targets: ['" << target << "']\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      const int log = ::open((dir_ + "/prometheus.log").c_str(), O_WRONLY | O_CREAT, 0644);
      ::dup2(log, 1);
      ::dup2(log, 2);
      const std::string config = "--config.file=" + dir_ + "/prometheus.yml";
      const std::string storage = "--storage.tsdb.path=" + dir_ + "/data";
      const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
      ::execlp("prometheus", "prometheus", config.c_str(), storage.c_str(), listen.c_str(),
               nullptr);
      ::_exit(127);
    }
  }
  ~PrometheusServer() {
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::filesystem::remove_all(dir_);
  }
  std::string api(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::string log() const {
    std::ifstream in(dir_ + "/prometheus.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST(MetricsTest, ARealPrometheusServerScrapesTheDaemonAndAnswersAQuery) {
  if (run_command({"sh", "-c", "command -v prometheus"}).exit_code != 0) {
    GTEST_SKIP() << "the prometheus server is not installed (Debian package prometheus; "
                    "tools/install-deps.sh installs it)";
  }
  DaemonProcess daemon;
  const std::string url = metrics_url(daemon);
  ASSERT_FALSE(url.empty()) << daemon.log();
  ASSERT_EQ(run_job(daemon.socket_path(), "prom-job", 2, allreduces_and_broadcasts), "");
  const std::string target = url.substr(7, url.find("/metrics") - 7);  // "127.0.0.1:PORT"
  PrometheusServer prometheus(target);
  // plexus_ops_total{plexus_job="prom-job",collective="allreduce"}, URL-encoded.
  const std::string query =
      "/api/v1/query?query=plexus_ops_total%7Bplexus_job%3D%22prom-job%22%2Ccollective%3D%22"
      "allreduce%22%7D";
  nlohmann::json answer;
  const auto deadline = Clock::now() + std::chrono::seconds(40);
  while (Clock::now() < deadline) {
    const HttpReply reply = http_get(prometheus.api(query), std::chrono::seconds(2));
    if (reply.status == 200) {
      answer = nlohmann::json::parse(reply.body, nullptr, false);
      if (!answer.is_discarded() && !answer["data"]["result"].empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_FALSE(answer.is_null() || answer.is_discarded() || answer["data"]["result"].empty())
      << "Prometheus never had the series within 40 s; its log:\n"
      << prometheus.log();
  const auto& series = answer["data"]["result"][0];
  EXPECT_EQ(series["metric"]["job"], "plexus") << "Prometheus' own job label, untouched";
  EXPECT_EQ(series["metric"]["plexus_job"], "prom-job");
  EXPECT_EQ(series["metric"]["collective"], "allreduce");
  EXPECT_EQ(series["value"][1], "7");
}

}  // namespace
}  // namespace plexus::test
