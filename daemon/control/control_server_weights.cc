// What the weight service asks of the control server: replies on its connections, posts to
// the control and engine threads, node messages through NodeJoins, and a session's GPU
// regions (the engine's table, read on its thread).
#include "daemon/control/control_connection.h"
#include "daemon/control/control_server.h"

namespace plexus::daemon {

WeightService::Hooks ControlServer::weight_hooks() {
  return WeightService::Hooks{
      .reply =
          [this](uint64_t id, capnp::MessageBuilder& reply) {
            Connection* c = find_connection(id);
            return c != nullptr && send_message(*c, reply);
          },
      .send_error = [this](
                        uint64_t id, uint32_t request_id, plexus_result_t code,
                        const std::string& message) { send_error(id, request_id, code, message); },
      .post = [this](std::function<void()> fn) { post(std::move(fn)); },
      .session = [this](uint64_t id) { return session_of(id); },
      .engine = [this](std::function<void(Engine&)> fn) { engine_.post(std::move(fn)); },
      .send_node =
          [this](uint64_t instance, const std::vector<std::string>& addresses,
                 capnp::MessageBuilder& message) {
            return comms_.nodes().send(instance, addresses, message);
          },
      .instance_id = [this] { return comms_.nodes().instance_id(); },
      .gpu_regions =
          [this](uint64_t id, std::vector<uint32_t> regions,
                 WeightService::Hooks::GpuRegionsFound then) {
            engine_.post([this, id, regions = std::move(regions), then = std::move(then),
                          device = device_memory_](Engine& engine) mutable {
              std::vector<std::shared_ptr<gpu::DeviceMapping>> found;
              for (uint32_t r : regions) found.push_back(engine.gpu_mapping(id, r));
              post([then = std::move(then), found = std::move(found),
                    device = std::move(device)]() mutable {
                then(std::move(found), std::move(device));
              });
            });
          }};
}

}  // namespace plexus::daemon
