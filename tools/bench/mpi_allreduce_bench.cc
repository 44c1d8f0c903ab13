// MPI_Allreduce peer benchmark: the same float-sum sweep and nccl-tests table as plexus-bench,
// so Plexus can be compared with the MPI library installed on the node. Launch with mpirun.
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>

#include "peer_bench_common.h"

namespace {

using plexus::peer_bench::Communicator;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum_out_of_place(const float* input, float* output, std::size_t count) override {
    MPI_Allreduce(input, output, to_mpi_count(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }

  void allreduce_sum_in_place(float* data, std::size_t count) override {
    MPI_Allreduce(MPI_IN_PLACE, data, to_mpi_count(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }

  double max_across_ranks(double value) override {
    double result = 0.0;
    MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return result;
  }

  std::int64_t sum_across_ranks(std::int64_t value) override {
    std::int64_t result = 0;
    MPI_Allreduce(&value, &result, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return result;
  }

 private:
  // MPI-3 counts are int; the sweep never gets near 2^31 floats (8 GiB) on one node, but a
  // silent wrap would benchmark the wrong size, so refuse instead.
  static int to_mpi_count(std::size_t count) {
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      std::fprintf(stderr, "mpi_allreduce_bench: %zu elements exceed MPI's int count\n", count);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return static_cast<int>(count);
  }

  int rank_ = 0;
  int size_ = 1;
};

// "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4": enough to say which library ran.
std::string mpi_library_name() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string name(version, static_cast<std::size_t>(length));
  return name.substr(0, name.find_first_of(",\n"));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int exit_status = 0;
  {
    MpiCommunicator communicator;
    std::string error;
    const auto options =
        plexus::peer_bench::parse_sweep_options(argc, argv, /*with_ranks=*/false, error);
    if (!options) {
      // Every rank parses the same arguments, so all of them stop here together.
      if (communicator.rank() == 0) {
        if (!error.empty()) std::fprintf(stderr, "mpi_allreduce_bench: %s\n", error.c_str());
        std::fputs(plexus::peer_bench::usage_text("mpi_allreduce_bench", false).c_str(),
                   error.empty() ? stdout : stderr);
      }
      MPI_Finalize();
      return error.empty() ? 0 : 2;
    }
    // A rank stuck in a collective would otherwise hold mpirun (and the caller) forever.
    alarm(static_cast<unsigned>(options->timeout_seconds));
    try {
      const std::string description =
          "mpi_allreduce_bench: MPI_Allreduce float sum, " + mpi_library_name();
      exit_status =
          plexus::peer_bench::run_allreduce_sweep(communicator, *options, description.c_str());
    } catch (const std::exception& exception) {
      std::fprintf(stderr, "mpi_allreduce_bench: rank %d: %s\n", communicator.rank(),
                   exception.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return exit_status;
}
