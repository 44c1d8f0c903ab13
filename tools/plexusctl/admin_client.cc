#include "tools/plexusctl/admin_client.h"

#include "shm/framing.h"

namespace plexus::ctl {

namespace control = shm::control;

AdminClient::AdminClient(const std::string& socket_path)
    : socket_path_(socket_path),
      channel_(std::make_unique<client::ControlChannel>(socket_path, 0)) {
  call(
      [](control::ClientMessage::Builder message) {
        auto hello = message.initHello();
        hello.setProtocolVersion(shm::kProtocolVersion);
        hello.setRole(control::Role::ADMIN);
        hello.setProcessName("plexusctl");
      },
      [](control::DaemonMessage::Reader) {});
}

void AdminClient::call(const std::function<void(control::ClientMessage::Builder)>& fill,
                       const std::function<void(control::DaemonMessage::Reader)>& use) {
  capnp::MallocMessageBuilder request;
  fill(request.initRoot<control::ClientMessage>());
  client::Reply reply = channel_->call(request);
  capnp::FlatArrayMessageReader reader(reply.words, common::untrusted_reader_options());
  auto root = reader.getRoot<control::DaemonMessage>();
  if (root.isError()) {
    throw Refused("plexusd on " + socket_path_ +
                  " refused: " + root.getError().getMessage().cStr());
  }
  use(root);
}

}  // namespace plexus::ctl
