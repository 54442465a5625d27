#include "models/control_plane.hpp"

#include "core/lease/requests.hpp"
#include "models/dynamo/node.hpp"
#include "models/sqs.hpp"

namespace leaseproof::models {
namespace {

constexpr Duration kTimeout = Duration::from_s(2);
constexpr Duration kRetryDelay = Duration::from_ms(500);

bool failed_with(const dynamo::Result<dynamo::Response>* result, std::string_view type) {
  return result != nullptr && !result->ok() && result->error().type == type;
}

}  // namespace

void ControlPlane::on_start(sim::NodeContext& context) {
  started_ = context.monotonic();
  create_table(context);
}

void ControlPlane::create_table(sim::NodeContext& context) {
  call_dynamo(context, environment_.dynamo, lease::create_table_request(environment_.config), kTimeout,
              [this, &context](const dynamo::Result<dynamo::Response>* result) {
                const bool done = (result != nullptr && result->ok()) ||
                                  failed_with(result, dynamo::error_type::resource_in_use);
                if (!done) {
                  context.set_timer(kRetryDelay, "control.retry", [this, &context] { create_table(context); });
                  return;
                }
                context.note("control.table_created", environment_.config.table.name);
                next(context);
              });
}

void ControlPlane::next(sim::NodeContext& context) {
  if (index_ >= environment_.plan.steps.size()) return;
  const ControlPlan::Step& step = environment_.plan.steps[index_];
  const Instant due = started_ + step.at;
  const Duration wait = std::max(Duration::zero(), due - context.monotonic());
  context.set_timer(wait, "control.step", [this, &context] { perform(context, environment_.plan.steps[index_]); });
}

void ControlPlane::perform(sim::NodeContext& context, const ControlPlan::Step& step) {
  dynamo::Request request = step.start
                                      ? lease::create_connection_request(environment_.config, step.connection, "wss://hub/" + step.connection)
                                      : lease::stop_connection_request(environment_.config, step.connection);
  call_dynamo(context, environment_.dynamo, std::move(request), kTimeout,
              [this, &context, step](const dynamo::Result<dynamo::Response>* result) {
                // A lost reply is retried; the retry's "condition failed" means
                // the first attempt applied.
                const bool done = (result != nullptr && result->ok()) ||
                                  (step.start && failed_with(result, dynamo::error_type::conditional_check_failed));
                if (!done) {
                  context.set_timer(kRetryDelay, "control.retry", [this, &context, step] { perform(context, step); });
                  return;
                }
                context.note(step.start ? "control.started" : "control.stopped", step.connection);
                if (step.start && environment_.notify) {
                  sqs_send(context, environment_.sqs, environment_.release_queue, step.connection,
                           "new@" + step.connection, step.connection, kTimeout, [](const SqsSendReply*) {});
                }
                ++index_;
                next(context);
              });
}

}  // namespace leaseproof::models
