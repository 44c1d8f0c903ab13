# Control messages between libplexus (or plexusctl) and plexusd over the unix stream
# socket. Each frame is a u32 byte length in host byte order (both ends are on one machine:
# common/frame_codec.h) followed by one Cap'n Proto message in the standard flat
# serialisation. File descriptors travel with SCM_RIGHTS on the frame that names them.
@0xc1a5e2b7d9f3a401;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("plexus::shm::control");

enum Role {
  rank @0;   # a process running collectives: has a pool and rings
  admin @1;  # plexusctl: queries; nicDrain needs root or plexusd's own user
}

struct Hello {
  protocolVersion @0 :UInt32;
  role @1 :Role;
  poolBytes @2 :UInt64;   # size of the pool memfd attached to this frame (rank role)
  processName @3 :Text;
  jobName @4 :Text;       # $PLEXUS_JOB, else the process name: groups sessions in metrics
}

struct CommInit {
  token @0 :Data;         # 16 bytes from the unique id
  nranks @1 :UInt32;
  rank @2 :UInt32;
  timeoutMs @3 :UInt32;
  rootInstance @4 :UInt64;       # from the unique id: the daemon where it forms (0: this node)
  rootAddresses @5 :List(Text);  # "ip:port" of that daemon's peer listener
  algorithm @6 :Text;            # PLEXUS_ALGO of this rank ("" = let the cost model choose)
}

struct CommLeave {
  comm @0 :UInt32;        # the session-local handle from CommInitReply
  abort @1 :Bool;         # abort: the other ranks' ops fail now
}

struct CommRevoke {
  comm @0 :UInt32;        # the session-local handle
  reason @1 :Text;        # the caller's words, for the other ranks' errors ("" = none)
}

# A successor of communicator `comm` without a unique id (plexus_comm_shrink): the ranks
# not excluded, renumbered densely. Answered as a commInit is (commInitReply).
struct CommShrink {
  comm @0 :UInt32;
  exclude @1 :List(UInt32);  # ranks of `comm` left out; every caller gives the same list
  abort @2 :Bool;            # revoke `comm` first (NCCL_SHRINK_ABORT)
  timeoutMs @3 :UInt32;
}

# Parks communicator `comm` on this rank (plexus_comm_suspend), or takes it up again: once
# every rank of it on the node has suspended it, the daemon releases the memory it keeps for
# it. Answered with commSuspendReply.
struct CommSuspend {
  comm @0 :UInt32;
  suspend @1 :Bool;       # false: resume
}

# A growth of communicator `comm` (plexus_comm_grow, _grow_id): its members keep their ranks
# and new ranks join with the unique id a member made. `sequence`: how many growths of `comm`
# this rank made before (every member counts alike, so all name the same one).
struct CommGrow {
  comm @0 :UInt32;
  nranks @1 :UInt32;      # the grown size (commGrow; commGrowId ignores it)
  sequence @2 :UInt32;
  timeoutMs @3 :UInt32;
}

# The unique id of a growth: its token and root, as plexus_get_unique_id would put them.
struct GrowId {
  token @0 :Data;
  rootInstance @1 :UInt64;       # 0: a communicator of this node alone
  rootAddresses @2 :List(Text);
}

struct NicDrain {
  nic @0 :Text;
  drained @1 :Bool;       # false: undrain
}

struct JobSet {
  name @0 :Text;
  trafficClass @1 :Text;  # latency, bulk or background
  weight @2 :UInt32;      # 1..1000
}

struct ClientMessage {
  requestId @0 :UInt32;
  union {
    hello @1 :Hello;
    commInit @2 :CommInit;
    commLeave @3 :CommLeave;
    status @4 :Void;
    links @5 :Void;         # the data links to peer daemons and their paths
    nicDrain @6 :NicDrain;
    ops @7 :Void;           # collectives in flight and the last ones finished
    events @8 :EventsRequest;
    registerGpuMemory @9 :GpuMemory;
    releaseGpuMemory @10 :UInt32;  # a region id from GpuMemoryReply
    nicFault @11 :Text;     # fault injection (plexusd --fault-injection): into the paths over this NIC
    jobSet @12 :JobSet;     # a job's scheduling policy (admin)
    engineHold @13 :UInt32; # fault injection (plexusd --fault-injection): hold the engine thread this many ms
    configShow @14 :Void;   # the settings in use
    configReload @15 :Void; # read the config file again (admin)
    nodeDrain @16 :NodeDrain;  # admit no new communicators, or admit them again (admin)
    commRevoke @17 :CommRevoke;
    commShrink @18 :CommShrink;
    commGrow @19 :CommGrow;     # answered with commInitReply
    commGrowId @20 :CommGrow;
    commSuspend @21 :CommSuspend;
    weightsPublish @22 :WeightsPublish;
    weightsPull @23 :WeightsPull;
    weightsLatest @24 :Text;    # a model's name: its newest complete version (0: none)
    weightsList @25 :Void;      # the store's models, versions and pullers (plexusctl models)
    weightsAdvertise @26 :WeightsKey;  # a key's token now names the model here, for other nodes
    weightsSubscribe @27 :WeightsKey;  # push this node the versions of the key's model
  }
}

# One tensor of a weights request: its name and where it is in the client's memory.
struct WeightTensor {
  name @0 :Text;
  offset @1 :UInt64;      # in the region
  bytes @2 :UInt64;
  region @3 :UInt32;      # 0: the pool; else a GPU allocation this process registered
                          # (gpuMemoryReply), copied by the daemon's copy engines
}

# A version of a model, or one shard of it, handed to the daemon: answered once the daemon
# holds a copy (the pool's bytes may then be reused).
struct WeightsPublish {
  model @0 :Text;
  version @1 :UInt64;     # from 1, each newer than the model's newest complete one
  shard @2 :UInt32;       # this publisher's part, 0 .. shards-1
  shards @3 :UInt32;      # the version is complete once every shard is in (1: unsharded)
  tensors @4 :List(WeightTensor);
}

# A version copied into the client's pool: by name, each tensor's bytes exactly as published.
struct WeightsPull {
  model @0 :Text;
  version @1 :UInt64;     # 0: the newest complete version newer than newerThan
  newerThan @2 :UInt64;
  timeoutMs @3 :UInt32;   # how long to wait for such a version (0: not at all)
  tensors @4 :List(WeightTensor);
}

# A model across nodes: a unique id's parts (plexus_weights_key) and the model's name here.
struct WeightsKey {
  model @0 :Text;                # advertise: the published model; subscribe: the local name
  token @1 :Data;                # 16 bytes
  rootInstance @2 :UInt64;       # subscribe: the publisher's daemon
  rootAddresses @3 :List(Text);
}

struct WeightVersionInfo {
  number @0 :UInt64;
  bytes @1 :UInt64;
  shards @2 :UInt32;
  shardsIn @3 :UInt32;
  complete @4 :Bool;
  ageS @5 :Float64;        # since it completed
}

struct WeightModelInfo {
  name @0 :Text;
  ownerUid @1 :UInt32;
  versions @2 :List(WeightVersionInfo);   # oldest first
  publishes @3 :UInt64;    # shards copied in
  pulls @4 :UInt64;
  pulledBytes @5 :UInt64;
  waiting @6 :UInt32;      # pulls waiting for a version now
}

struct WeightsListReply {
  models @0 :List(WeightModelInfo);
  heldBytes @1 :UInt64;
  capBytes @2 :UInt64;
  versionsKept @3 :UInt32;
  spareBytes @4 :UInt64;   # buffers of dropped versions kept for the next of their size
}

struct NodeDrain {
  undrain @0 :Bool;       # admit new communicators again
  query @1 :Bool;         # change nothing: report how the drain stands
}

# One GPU allocation of the client, exported once and mapped by the daemon once.
struct GpuMemory {
  ipcHandle @0 :Data;     # cudaIpc: 64 bytes from cuIpcGetMemHandle; posixFd: empty
  bytes @1 :UInt64;       # the whole allocation
  deviceUuid @2 :Data;    # 16 bytes: the GPU it is on
  handleType @3 :GpuHandleType;
}

enum GpuHandleType {
  cudaIpc @0;   # cudaMalloc memory
  posixFd @1;   # cuMemCreate memory: the message carries its shareable handle (one fd)
}

struct EventsRequest {
  after @0 :UInt64;       # sequence number of the last event already seen (0: from the oldest kept)
  max @1 :UInt32;
}

struct Error {
  code @0 :UInt32;        # plexus_result_t
  message @1 :Text;
}

# Attached fds, in order: ring memfd, submission eventfd, completion eventfd.
struct HelloReply {
  protocolVersion @0 :UInt32;
  sessionId @1 :UInt64;
  daemonPid @2 :UInt32;
  instanceId @3 :UInt64;          # random per daemon start: names it in unique ids
  peerAddresses @4 :List(Text);   # where it accepts peer daemons (empty: single node only)
}

struct CommInitReply {
  comm @0 :UInt32;
}

struct RankInfo {
  rank @0 :UInt32;
  pid @1 :Int32;
  sessionId @2 :UInt64;
}

struct CommInfo {
  tokenPrefix @0 :Text;   # first 8 hex digits: enough to tell comms apart, useless to join
  nranks @1 :UInt32;
  joined @2 :UInt32;
  state @3 :Text;         # joining, ready, suspended, broken, revoked
  opsCompleted @4 :UInt64;
  bytesMoved @5 :UInt64;
  ranks @6 :List(RankInfo);
  brokenReason @7 :Text;
  origin @8 :Text;        # what it succeeds ("shrink of 1a2b3c4d without rank(s) 3"; "": none)
  successor @9 :Text;     # a communicator here that succeeds it ("": none)
}

struct SessionInfo {
  id @0 :UInt64;
  pid @1 :Int32;
  uid @2 :UInt32;
  role @3 :Role;
  processName @4 :Text;
  poolBytes @5 :UInt64;
  comms @6 :UInt32;
  opsSubmitted @7 :UInt64;
  badEntries @8 :UInt64;
  job @9 :Text;
}

struct CollectiveCount {
  collective @0 :Text;
  ops @1 :UInt64;
  payloadBytes @2 :UInt64;
}

# A job's counters since the daemon started (they outlive its sessions).
struct JobInfo {
  name @0 :Text;
  sessions @1 :UInt32;     # rank sessions connected now
  collectives @2 :List(CollectiveCount);
  failedCompletions @3 :UInt64;
  # Scheduling on the links to other nodes (plexusctl job set).
  trafficClass @4 :Text;           # latency, bulk, background
  weight @5 :UInt32;
  configuredShare @6 :Float64;     # its weight's part of its class's busy jobs', last second
  achievedShare @7 :Float64;       # its part of all bytes sent to peers, last second
  scheduledBytes @8 :UInt64;       # payload sent to peers
  queueDelayFrames @9 :UInt64;     # frames that left a send scheduler
  queueDelayMeanUs @10 :Float64;   # how long they waited there
  queueDelayP99Us @11 :Float64;    # upper bound of the bucket holding the 99th percentile
  # Admission on this node ([jobs.NAME] in the config; 0: no cap).
  maxInflightBytes @12 :UInt64;
  inflightBytes @13 :UInt64;       # its ops' bytes from submission to completion, now
  maxStagingBytes @14 :UInt64;
  refusedOps @15 :UInt64;          # refused for a cap or --max-gpu-staging-bytes
}

struct StatusReply {
  version @0 :Text;
  pid @1 :UInt32;
  uptimeMs @2 :UInt64;
  socketPath @3 :Text;
  workers @4 :UInt32;
  reduceIsa @5 :Text;
  sessions @6 :List(SessionInfo);
  comms @7 :List(CommInfo);
  opsCompleted @8 :UInt64;
  badEntries @9 :UInt64;
  badMessages @10 :UInt64;
  jobs @11 :List(JobInfo);
  nodeName @12 :Text;
}

# The last second of a path's or NIC's telemetry windows (absent with telemetry off).
struct WindowStats {
  seconds @0 :Float64;         # the span these cover
  busyWindows @1 :UInt32;      # windows with a data chunk either way
  bytesOut @2 :UInt64;         # data payload
  bytesIn @3 :UInt64;
  resentBytes @4 :UInt64;
  errors @5 :UInt64;           # path failures
  busyOutBytesPerS @6 :Float64;  # sent per second of busy windows
  latencySamples @7 :UInt64;   # chunks acknowledged (send to acknowledgement)
  latencyP50Us @8 :Float64;
  latencyP99Us @9 :Float64;
  latencyMaxUs @10 :Float64;
}

struct PathInfo {
  nic @0 :Text;
  local @1 :Text;         # "ip:port"
  remote @2 :Text;
  state @3 :Text;         # active, standby (a backup), probation, drained
  bytesSent @4 :UInt64;
  bytesReceived @5 :UInt64;
  rateBytesPerS @6 :Float64;
  hasRecent @7 :Bool;
  recent @8 :WindowStats;
  deliveryBytesPerS @9 :Float64;  # the kernel's latest delivery-rate sample (TCP_INFO)
  deliveryAppLimited @10 :Bool;   # that sample had too little data queued to say much
  rttUs @11 :Float64;
  kernelUnsentBytes @12 :UInt64;  # queued in its socket, not yet sent
  transport @13 :Text;            # tcp, rdma
  latencyClass @14 :Bool;         # the latency class's connection (--latency-connections)
}

struct NicInfo {
  name @0 :Text;
  address @1 :Text;
  state @2 :Text;          # the kernel's operstate: up, down, ...
  speedMbps @3 :UInt32;    # 0: unknown
  drained @4 :Bool;
  paths @5 :UInt32;        # live paths over it now
  # Since the daemon started (0 with telemetry off):
  bytesOut @6 :UInt64;
  bytesIn @7 :UInt64;
  resentBytes @8 :UInt64;
  failures @9 :UInt64;
  hasRecent @10 :Bool;
  recent @11 :WindowStats;
  transports @12 :Text;    # of its live paths: "tcp", "rdma", "rdma+tcp"; "" with none
}

struct PeerLinkInfo {
  node @0 :Text;
  instance @1 :UInt64;
  acks @2 :Bool;          # the reliable channel (sequence numbers, acknowledgements)
  paths @3 :List(PathInfo);
  framesSent @4 :UInt64;
  framesResent @5 :UInt64;
  bytesResent @6 :UInt64;
  duplicatesDropped @7 :UInt64;
  pathFailures @8 :UInt64;
  failbacks @9 :UInt64;
  downForMs @10 :Int64;   # no live path for this long; -1 while one is live (or dormant)
  dormant @11 :Bool;      # its paths closed while idle; one opens on its next use
}

struct LinksReply {
  nics @0 :List(Text);    # where this daemon reaches peers
  drained @1 :List(Text);
  peers @2 :List(PeerLinkInfo);
  nicInfo @3 :List(NicInfo);
  telemetryWindowUs @4 :UInt32;  # 0: telemetry off
}

struct NicDrainReply {
  paths @0 :UInt32;       # paths over the NIC now
}

struct OpRank {
  rank @0 :UInt32;
  pid @1 :Int32;
  node @2 :Text;
}

struct InflightOp {
  comm @0 :Text;          # token prefix
  job @1 :Text;
  collective @2 :Text;
  seq @3 :UInt64;         # collective number within the communicator
  bytes @4 :UInt64;       # count x element size
  algorithm @5 :Text;     # between nodes; "local" on one node; "" before it starts
  state @6 :Text;         # "waiting for ranks", "running"
  ageMs @7 :UInt64;       # since the first local rank submitted it
  idleMs @8 :UInt64;      # since it last made progress
  stalled @9 :Bool;       # idle for the stall threshold or longer
  arrived @10 :UInt32;    # local ranks that submitted it
  localRanks @11 :UInt32;
  missingRanks @12 :List(OpRank);  # local ranks that have not submitted it
  waitingNodes @13 :List(Text);    # peer nodes whose data for it has not all come
  slicesDone @14 :UInt64;
  slices @15 :UInt64;
  waitingFor @16 :Text;   # the above as a sentence
}

struct FinishedOp {
  comm @0 :Text;
  job @1 :Text;
  collective @2 :Text;
  seq @3 :UInt64;
  bytes @4 :UInt64;
  algorithm @5 :Text;
  status @6 :Text;        # "ok" or the error's name
  endUnixMs @7 :Int64;
  arrivalSpreadUs @8 :UInt64;  # first to last local rank submitting it
  runUs @9 :UInt64;            # last submission to completion
  lastRank @10 :Int32;         # the local rank that submitted last
  # Multi-node ops: time per stage summed over the slices (which overlap); slices 0: none.
  slices @11 :UInt64;
  localInUs @12 :UInt64;       # gathering or reducing the local ranks' inputs
  networkUs @13 :UInt64;       # the inter-node rounds
  localOutUs @14 :UInt64;      # copying results out to the local ranks
  slowestSliceUs @15 :UInt64;  # the slowest slice's inter-node rounds
}

struct OpsReply {
  node @0 :Text;
  stallMs @1 :UInt32;
  inflight @2 :List(InflightOp);
  finished @3 :List(FinishedOp);  # newest last; empty with telemetry off
}

struct EventsReply {
  lines @0 :List(Text);   # one JSON object each, oldest first
  nextAfter @1 :UInt64;   # pass as `after` to continue
  missed @2 :UInt64;      # events no longer kept in memory (see the event file)
}

struct DaemonMessage {
  requestId @0 :UInt32;
  union {
    error @1 :Error;
    helloReply @2 :HelloReply;
    commInitReply @3 :CommInitReply;
    commLeaveReply @4 :Void;
    statusReply @5 :StatusReply;
    linksReply @6 :LinksReply;
    nicDrainReply @7 :NicDrainReply;
    opsReply @8 :OpsReply;
    eventsReply @9 :EventsReply;
    gpuMemoryReply @10 :UInt32;      # the region id entries name for the allocation
    releaseGpuMemoryReply @11 :Void;
    nicFaultReply @12 :UInt32;       # paths the fault was injected into
    jobSetReply @13 :Void;
    engineHoldReply @14 :Void;       # sent before the hold begins
    configShowReply @15 :ConfigShowReply;
    configReloadReply @16 :ConfigReloadReply;
    nodeDrainReply @17 :NodeDrainReply;
    commRevokeReply @18 :Void;       # this node's ops on it have failed
    growIdReply @19 :GrowId;
    commSuspendReply @20 :UInt64;    # bytes the daemon released for the communicator just now
    weightsPublishReply @21 :UInt64; # the version the daemon holds now (complete or not)
    weightsPullReply @22 :UInt64;    # the version copied
    weightsLatestReply @23 :UInt64;  # 0: none complete
    weightsListReply @24 :WeightsListReply;
    weightsAdvertiseReply @25 :Void;
    weightsSubscribeReply @26 :UInt64;  # the version held here now (0: none yet)
  }
}

struct ConfigShowReply {
  text @0 :Text;                  # the settings in use, as a config file (TOML)
  file @1 :Text;                  # the --config file ("": none)
  restartNeeded @2 :List(Text);   # changes read from the file that wait for a restart
}

struct ConfigReloadReply {
  applied @0 :List(Text);         # "stall-ms: 1000 -> 500", ...
  restartNeeded @1 :List(Text);   # changed in the file, in use only after a restart
}

struct NodeDrainReply {
  draining @0 :Bool;
  comms @1 :UInt32;               # communicators still served
  ranks @2 :UInt32;               # their ranks on this node
  jobs @3 :List(Text);            # the jobs they belong to
  safeToStop @4 :Bool;            # draining, and no communicator is left or forming
  rankSessions @5 :UInt32;        # rank processes connected (with or without a communicator)
  forming @6 :Bool;               # communicators some ranks have joined, not yet formed
}
