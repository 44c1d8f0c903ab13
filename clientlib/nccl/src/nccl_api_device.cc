// NCCL's device API (nccl_device.h, NCCL 2.28): the host calls that set up kernels which
// move data themselves (symmetric windows read and written by load/store, GPU-initiated
// networking). Plexus clients launch no kernels and reach no peer's memory, so a device
// communicator is refused with ncclInvalidUsage and a sentence that says so. The calls are
// exported all the same: PyTorch 2.11 (its NCCL symmetric memory) links them, and a
// program that names a symbol this library lacks cannot even be loaded over it.
// Teams answer as for a communicator whose ranks each see only their own memory: the
// load/store team is the rank alone and the rail team is every rank.
#include <nccl.h>

#include <string>

#include "clientlib/nccl/src/nccl_errors.h"

using namespace plexus::nccl;  // NOLINT: the C entry points below

// nccl_device.h's types, as far as these calls use them: the team by value, the rest
// behind pointers this library never follows.
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;

namespace {

ncclResult_t refuse(const char* call) {
  return guarded(call, [call] {
    return fail(ncclInvalidUsage,
                std::string(call) +
                    ": Plexus's libnccl has no device API (device communicators, symmetric "
                    "load/store windows, GPU-initiated networking): plexusd moves the data and "
                    "clients launch no kernels. Use the host collectives");
  });
}

// The communicator's rank and size, or {0, 0} for one this library did not make (a null
// one answered without a call that would record a last error).
ncclTeam_t world_of(ncclComm_t comm) {
  ncclTeam_t team{0, 0, 1};
  if (comm == nullptr) return team;
  if (ncclCommCount(comm, &team.nRanks) != ncclSuccess ||
      ncclCommUserRank(comm, &team.rank) != ncclSuccess) {
    return ncclTeam_t{0, 0, 1};
  }
  return team;
}

}  // namespace

NCCL_API ncclResult_t ncclDevCommCreate(ncclComm_t /*comm*/, const ncclDevCommRequirements* /*req*/,
                                        ncclDevComm* /*out*/) {
  return refuse("ncclDevCommCreate");
}

NCCL_API ncclResult_t ncclDevCommDestroy(ncclComm_t /*comm*/, const ncclDevComm* /*dev*/) {
  return refuse("ncclDevCommDestroy");
}

NCCL_API ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t /*team*/, int /*n*/,
                                                      ncclLsaBarrierHandle* /*out*/,
                                                      ncclDevResourceRequirements* /*req*/) {
  return refuse("ncclLsaBarrierCreateRequirement");
}

NCCL_API ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t /*comm*/, ncclTeam_t /*team*/,
                                                      int /*n*/, ncclGinBarrierHandle* /*out*/,
                                                      ncclDevResourceRequirements* /*req*/) {
  return refuse("ncclGinBarrierCreateRequirement");
}

NCCL_API ncclResult_t ncclLLA2ACreateRequirement(int /*blocks*/, int /*slots*/,
                                                 ncclLLA2AHandle* /*out*/,
                                                 ncclDevResourceRequirements* /*req*/) {
  return refuse("ncclLLA2ACreateRequirement");
}

// No slots: there is no device all-to-all to size.
NCCL_API int ncclLLA2ACalcSlots(int /*max_elements*/, int /*max_element_size*/) { return 0; }

NCCL_API ncclTeam_t ncclTeamWorld(ncclComm_t comm) { return world_of(comm); }

NCCL_API ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  return ncclTeam_t{world_of(comm).nRanks > 0 ? 1 : 0, 0, 1};
}

NCCL_API ncclTeam_t ncclTeamRail(ncclComm_t comm) { return world_of(comm); }

// Rank `rank` of `team` as a world rank: teams are strided runs through the caller.
NCCL_API int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  return world_of(comm).rank + (rank - team.rank) * team.stride;
}

// As a rank of the load/store team (the caller alone): 0 for the caller, -1 for any other.
NCCL_API int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  return ncclTeamRankToWorld(comm, team, rank) == world_of(comm).rank ? 0 : -1;
}
