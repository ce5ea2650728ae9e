#include <zmq.hpp>

#include "connectors/sinks/sinks.h"
#include "connectors/zmq_endpoint.h"
#include "formats/jsonl_codec.h"

namespace runlens::connectors {
namespace {

// Publishes every alert as it is released: a two-frame message [kind, alert
// JSON], so subscribers filter by kind with a ZeroMQ topic prefix.
class ZmqPubSink final : public Operator {
 public:
  explicit ZmqPubSink(const std::string& endpoint) : ctx_(1), sock_(ctx_, zmq::socket_type::pub) {
    sock_.set(zmq::sockopt::linger, 1000);
    sock_.set(zmq::sockopt::sndhwm, 100000);
    try {
      sock_.bind(endpoint);
    } catch (const zmq::error_t& e) {
      throw runtime::ConfigError(
          {runtime::Diagnostic{{}, "", "cannot bind the alert stream to " + endpoint + ": " + e.what()}});
    }
  }
  void process(const Record& r, Emitter&) override {
    if (r.kind() != Kind::kAlert) return;
    const Alert& a = r.alert();
    std::string body;
    jsonl::encode_alert(a, &body);
    // PUB never blocks: with no subscriber, or a slow one past its HWM, messages are dropped by ZeroMQ.
    (void)sock_.send(zmq::buffer(a.kind), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)sock_.send(zmq::buffer(body), zmq::send_flags::dontwait);
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
};

class ZmqPubSinkDef final : public OperatorDef {
 public:
  explicit ZmqPubSinkDef(std::string endpoint) : endpoint_(std::move(endpoint)) {}
  std::unique_ptr<Operator> open(const runtime::OperatorContext&) const override {
    return std::make_unique<ZmqPubSink>(endpoint_);
  }
  std::string describe() const override { return "bind=" + endpoint_; }

 private:
  std::string endpoint_;
};

}  // namespace

void RegisterZmqPubSink(Registry& registry) {
  runtime::ComponentInfo info;
  info.type = "zmq_pub";
  info.role = runtime::Role::kSink;
  info.doc =
      "Publishes every alert as it is released on a ZeroMQ PUB socket, as two frames [kind, alert JSON]: "
      "subscribers filter by kind (`runlens tail --kind straggler`).";
  info.params = {
      {.name = "bind", .type = runtime::ParamType::kString, .doc = "Endpoint to bind, e.g. tcp://127.0.0.1:5556."},
  };
  info.accepts = mask(Kind::kAlert);
  registry.add_operator(std::move(info), [](const runtime::BuildContext& ctx) {
    const std::string& bind = ctx.params->get_string("bind");
    if (bind.empty()) ctx.fail("bind", "bind must not be empty");
    std::string why;
    if (!check_zmq_endpoint(bind, &why)) ctx.fail("bind", why);
    return std::make_unique<ZmqPubSinkDef>(bind);
  });
}

}  // namespace runlens::connectors
