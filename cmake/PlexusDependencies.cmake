# Debian 12 packages: capnproto libcapnp-dev libuv1-dev libboost-dev prometheus-cpp-dev
# libgtest-dev libgmock-dev libcli11-dev libspdlog-dev nlohmann-json3-dev.
find_package(Threads REQUIRED)
find_package(CapnProto REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(UV REQUIRED IMPORTED_TARGET libuv)  # libuv 1.44 ships no CMake config
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)  # plexusd's sd_notify
# plexusd's config file: strict TOML with the line of every error (CLI11's own reader
# ignores unknown keys and malformed lines).
pkg_check_modules(TOMLPP REQUIRED IMPORTED_TARGET tomlplusplus)
find_package(Boost 1.74 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)  # core + pull: the /metrics endpoint
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)  # HMAC-SHA256 for the peer handshake

# CUDA: optional from the start (GPU buffers arrive with a later issue).
set(PLEXUS_HAVE_CUDA OFF)
if(NOT PLEXUS_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(PLEXUS_HAVE_CUDA ON)
  elseif(PLEXUS_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PLEXUS_WITH_CUDA=ON but no CUDA toolkit was found")
  endif()
endif()

# RDMA: rdma-core's libibverbs, optional.
set(PLEXUS_HAVE_RDMA OFF)
if(NOT PLEXUS_WITH_RDMA STREQUAL "OFF")
  find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
  find_library(IBVERBS_LIBRARY ibverbs)
  if(IBVERBS_INCLUDE_DIR AND IBVERBS_LIBRARY)
    set(PLEXUS_HAVE_RDMA ON)
  elseif(PLEXUS_WITH_RDMA STREQUAL "ON")
    message(FATAL_ERROR "PLEXUS_WITH_RDMA=ON but libibverbs (rdma-core, libibverbs-dev) was not found")
  endif()
endif()
