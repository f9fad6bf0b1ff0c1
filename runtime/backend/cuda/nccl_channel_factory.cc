// runtime.transport: NCCL in a build with NCCL: an NcclDataChannel on the backend's GPU.
#include "runtime/backend/cuda/nccl_channel_factory.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/skip_edges.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/nccl/nccl_data_channel.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_device.h"
#include "runtime/schedule/rank_layout.h"

namespace gpipe {
namespace {

// The ranks `rank` exchanges boundary tensors with: its replica's neighbouring stages under the
// plan's placement (looped chunks wrap around; a V_SHAPE turn stays on the rank), as the
// worker's RankLayout says. A model with skip connections (skip_add, skip_concat) may send
// between any two stages of a replica, so there every other stage of the replica is a peer.
absl::StatusOr<std::vector<int>> PeersOf(const pb::Plan& plan, int rank) {
  const pb::Pipeline& pipeline = plan.pipeline();
  ASSIGN_OR_RETURN(const schedule::RankLayout layout,
                   schedule::RankLayout::Create(pipeline.data_parallel(), pipeline.stages()));
  ASSIGN_OR_RETURN(const std::vector<SkipEdge> skips, FindSkipEdges(plan.model()));
  if (skips.empty()) return layout.Neighbours(rank, schedule::TopologyOf(pipeline));
  std::vector<int> peers;
  for (int stage = 0; stage < layout.stages(); ++stage) {
    const int peer = layout.RankOf(layout.ReplicaOf(rank), stage);
    if (peer != rank) peers.push_back(peer);
  }
  return peers;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataChannel>> CreateNcclChannel(const pb::Plan& plan, MPI_Comm world,
                                                               AbortPoller abort_poller,
                                                               absl::Duration setup_timeout,
                                                               Device& device, int ordinal,
                                                               const std::string& host) {
  int rank = 0;
  RETURN_IF_ERROR(MpiStatus(MPI_Comm_rank(world, &rank), "MPI_Comm_rank"));
  ASSIGN_OR_RETURN(std::vector<int> peers, PeersOf(plan, rank));
  ASSIGN_OR_RETURN(const std::string bus_id, PciBusIdOf(ordinal));
  ASSIGN_OR_RETURN(
      std::unique_ptr<NcclDataChannel> channel,
      NcclDataChannel::Create(world, std::move(abort_poller), nullptr,
                              NcclDataChannelOptions{
                                  .device = &device,
                                  .compute_stream = ComputeStreamOf(device),
                                  .placement = absl::StrCat("host ", host, " GPU ", bus_id),
                                  .peers = std::move(peers),
                                  .setup_timeout = setup_timeout,
                              }));
  return std::unique_ptr<DataChannel>(std::move(channel));
}

}  // namespace gpipe
