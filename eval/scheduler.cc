#include "eval/scheduler.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "runtime/status.h"

namespace runlens::eval {

std::string_view shard_state_name(ShardState s) {
  switch (s) {
    case ShardState::kQueued:
      return "queued";
    case ShardState::kRunning:
      return "running";
    case ShardState::kDone:
      return "done";
    case ShardState::kCached:
      return "cached";
    case ShardState::kFailed:
      return "failed";
  }
  return "?";
}

std::string Decision::str() const { return "t=" + std::to_string(at_ms) + "ms " + text; }

namespace {
std::string mib(int64_t v) { return std::to_string(v) + " MiB"; }
std::string seconds(int64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000) {
    std::string frac = std::to_string(1000 + ms % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + " s";
}
}  // namespace

EvaluationSpec make_evaluation_spec(const Suite& suite, const std::string& evaluation_id,
                                    const std::string& checkpoint_id, int64_t submitted_ms) {
  RUNLENS_CHECK(suite.dataset.items.has_value(), "a suite's item count is resolved before it is scheduled");
  EvaluationSpec e;
  e.evaluation_id = evaluation_id;
  e.priority = suite.priority;
  if (suite.deadline_s) e.deadline_ms = submitted_ms + *suite.deadline_s * 1000;
  e.requirements = suite.workers;
  e.checkpoint_id = checkpoint_id;
  e.max_attempts = suite.max_attempts;
  e.evaluator = suite.evaluator_version;
  e.shards = plan_shards(evaluation_id, *suite.dataset.items, suite.partition_size, suite.dataset.first_item);
  return e;
}

Scheduler::Scheduler(SchedulerOptions options) : options_(options) {}

const Scheduler::EvalEntry* Scheduler::find(const std::string& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &evals_[it->second];
}

Scheduler::QueueKey Scheduler::key_of(int e, int partition) const {
  const EvaluationSpec& s = evals_[e].spec;
  return {static_cast<int>(s.priority), s.deadline_ms.value_or(std::numeric_limits<int64_t>::max()), e, partition};
}

void Scheduler::enqueue(int e, int partition) {
  evals_[e].shards[partition].state = ShardState::kQueued;
  evals_[e].queued++;
  with_queued_.insert(e);
  queue_.insert(key_of(e, partition));
}

void Scheduler::dequeued(int e) {
  if (--evals_[e].queued == 0) with_queued_.erase(e);
}

void Scheduler::log(int e, int64_t at_ms, int partition, std::string text) {
  evals_[e].log.push_back(Decision{at_ms, partition, std::move(text)});
}

void Scheduler::add_worker(const WorkerSpec& w, int64_t now_ms) {
  if (w.id.empty() || w.slots < 1) throw std::invalid_argument("a worker needs an id and at least one slot");
  auto it = worker_index_.find(w.id);
  if (it != worker_index_.end()) {
    WorkerEntry& we = workers_[it->second];
    if (we.alive) lose_worker(it->second, now_ms, "worker " + w.id + " registered again");
    we = WorkerEntry{w, now_ms, true, 0, {}, -1, {}};
    return;
  }
  worker_index_[w.id] = static_cast<int>(workers_.size());
  workers_.push_back(WorkerEntry{w, now_ms, true, 0, {}, -1, {}});
}

bool Scheduler::heartbeat(const std::string& worker, int64_t now_ms, const std::vector<std::string>* loaded) {
  auto it = worker_index_.find(worker);
  if (it == worker_index_.end() || !workers_[it->second].alive) return false;
  WorkerEntry& w = workers_[it->second];
  w.last_heartbeat_ms = std::max(w.last_heartbeat_ms, now_ms);
  if (loaded) w.loaded = *loaded;
  return true;
}

void Scheduler::remove_worker(const std::string& worker, int64_t now_ms, const std::string& reason) {
  auto it = worker_index_.find(worker);
  if (it == worker_index_.end() || !workers_[it->second].alive) return;
  lose_worker(it->second, now_ms, "worker " + worker + " left: " + reason);
}

void Scheduler::submit(EvaluationSpec spec, int64_t now_ms) {
  if (spec.evaluation_id.empty()) throw std::invalid_argument("an evaluation needs an id");
  if (index_.count(spec.evaluation_id))
    throw std::invalid_argument("evaluation " + spec.evaluation_id + " was submitted already");
  if (spec.shards.empty()) throw std::invalid_argument("evaluation " + spec.evaluation_id + " has no shards");
  if (spec.max_attempts < 1) throw std::invalid_argument("max_attempts must be at least 1");
  if (!spec.cached.empty() && spec.cached.size() != spec.shards.size())
    throw std::invalid_argument("evaluation " + spec.evaluation_id + ": one cached flag per shard is needed");
  if (!spec.done.empty() && spec.done.size() != spec.shards.size())
    throw std::invalid_argument("evaluation " + spec.evaluation_id + ": one done flag per shard is needed");
  if (!spec.failed.empty() && spec.failed.size() != spec.shards.size())
    throw std::invalid_argument("evaluation " + spec.evaluation_id + ": one failed flag per shard is needed");
  if (!spec.prior_attempts.empty() && spec.prior_attempts.size() != spec.shards.size())
    throw std::invalid_argument("evaluation " + spec.evaluation_id + ": one prior attempt count per shard is needed");
  const int e = static_cast<int>(evals_.size());
  index_[spec.evaluation_id] = e;
  EvalEntry entry;
  entry.submitted_ms = now_ms;
  entry.shards.resize(spec.shards.size());
  entry.spec = std::move(spec);
  evals_.push_back(std::move(entry));
  EvalEntry& ev = evals_[e];
  int cached = 0, resumed_done = 0, resumed_failed = 0, resumed = 0;
  for (size_t i = 0; i < ev.shards.size(); ++i) {
    if (!ev.spec.prior_attempts.empty()) {
      ev.shards[i].attempts = ev.shards[i].prior = std::max(0, ev.spec.prior_attempts[i]);
      if (ev.shards[i].prior > 0) resumed++;
    }
    if (!ev.spec.cached.empty() && ev.spec.cached[i]) {
      ev.shards[i].state = ShardState::kCached;
      ev.cached++;
      cached++;
    } else if (!ev.spec.done.empty() && ev.spec.done[i]) {
      ev.shards[i].state = ShardState::kDone;
      ev.done++;
      resumed_done++;
    } else if (!ev.spec.failed.empty() && ev.spec.failed[i]) {
      ev.shards[i].state = ShardState::kFailed;
      ev.failed++;
      resumed_failed++;
    } else {
      enqueue(e, static_cast<int>(i));
    }
  }
  std::string text = "queued " + std::to_string(ev.shards.size()) + " shards as " +
                     std::string(priority_name(ev.spec.priority)) + " (" +
                     std::string(priority_meaning(ev.spec.priority)) + ")";
  if (ev.spec.deadline_ms) text += " with deadline t=" + std::to_string(*ev.spec.deadline_ms) + "ms";
  text += ", needing a " + std::string(pool_name(ev.spec.requirements.pool)) + " worker with " +
          mib(ev.spec.requirements.memory_mib);
  if (!ev.spec.evaluator.empty()) text += " running evaluator " + ev.spec.evaluator;
  if (cached) text += "; " + std::to_string(cached) + " shards served from the cache";
  if (resumed_done) text += "; " + std::to_string(resumed_done) + " shards done before a restart";
  if (resumed_failed) text += "; " + std::to_string(resumed_failed) + " shards failed before a restart (not run again)";
  if (resumed) text += "; " + std::to_string(resumed) + " shards had attempts before a restart (numbering continues)";
  log(e, now_ms, -1, text);
  update_status(e, now_ms);
}

bool Scheduler::has_loaded(const WorkerEntry& w, const std::string& checkpoint) const {
  return !checkpoint.empty() && std::find(w.loaded.begin(), w.loaded.end(), checkpoint) != w.loaded.end();
}

std::string Scheduler::rejection(const WorkerEntry& w, const EvalEntry& e) const {
  const WorkerRequirements& r = e.spec.requirements;
  const std::string& id = w.spec.id;
  if (!w.alive) return id + " is not heartbeating";
  if (w.spec.pool != r.pool)
    return id + (r.pool == Pool::kGpu ? " lacks a GPU" : " is in the GPU pool (this is CPU work)");
  if (w.spec.memory_mib < r.memory_mib)
    return id + " has " + mib(w.spec.memory_mib) + " of the " + mib(r.memory_mib) + " needed";
  if (!w.spec.evaluators.empty() && !e.spec.evaluator.empty() &&
      std::find(w.spec.evaluators.begin(), w.spec.evaluators.end(), e.spec.evaluator) == w.spec.evaluators.end())
    return id + " does not run evaluator " + e.spec.evaluator;
  if (w.reserved_for >= 0 && e.spec.priority != Priority::kP0)
    return id + " is reserved for P0 evaluation " + evals_[w.reserved_for].spec.evaluation_id;
  if (w.running >= w.spec.slots)
    return id + " is busy (" + std::to_string(w.running) + " of " + std::to_string(w.spec.slots) + " slots)";
  return {};
}

std::string Scheduler::order_reason(int e) const {
  const EvalEntry& me = evals_[e];
  const int my_p = static_cast<int>(me.spec.priority);
  const int64_t my_d = me.spec.deadline_ms.value_or(std::numeric_limits<int64_t>::max());
  // The queued evaluation submitted earliest that this one goes before: a
  // lower priority, or the same priority with a later deadline.
  int passed_lower = -1, passed_deadline = -1, others = 0;
  for (int o : with_queued_) {  // ascending: submission order
    if (o == e) continue;
    ++others;
    if (o > e) continue;
    const EvalEntry& other = evals_[o];
    const int p = static_cast<int>(other.spec.priority);
    const int64_t d = other.spec.deadline_ms.value_or(std::numeric_limits<int64_t>::max());
    if (p > my_p && passed_lower < 0) passed_lower = o;
    if (p == my_p && d > my_d && passed_deadline < 0) passed_deadline = o;
  }
  const std::string mine = std::string(priority_name(me.spec.priority));
  if (passed_lower >= 0)
    return mine + " before " + std::string(priority_name(evals_[passed_lower].spec.priority)) +
           " work queued earlier (" + evals_[passed_lower].spec.evaluation_id + ")";
  if (passed_deadline >= 0)
    return mine + " with deadline t=" + std::to_string(my_d) + "ms before " +
           evals_[passed_deadline].spec.evaluation_id +
           (evals_[passed_deadline].spec.deadline_ms ? "'s later deadline" : " without a deadline") +
           ", queued earlier";
  if (others == 0) return mine + ", the only queued work";
  return mine + ", first in priority, deadline and submission order";
}

std::vector<Assignment> Scheduler::schedule(int64_t now_ms) {
  std::vector<Assignment> out;
  auto free_slots = [&] {
    for (const auto& w : workers_) {
      if (w.alive && w.running < w.spec.slots) return true;
    }
    return false;
  };
  auto it = queue_.begin();
  bool any_free = free_slots();
  while (it != queue_.end()) {
    const auto [prio, deadline, e, partition] = *it;
    EvalEntry& ev = evals_[e];
    if (!any_free && ev.spec.priority != Priority::kP0) break;
    // The best eligible worker (rule 3).
    int best = -1;
    for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
      if (!rejection(workers_[w], ev).empty()) continue;
      if (best < 0) {
        best = w;
        continue;
      }
      const WorkerEntry& a = workers_[w];
      const WorkerEntry& b = workers_[best];
      const bool la = has_loaded(a, ev.spec.checkpoint_id), lb = has_loaded(b, ev.spec.checkpoint_id);
      const int fa = a.spec.slots - a.running, fb = b.spec.slots - b.running;
      if (la != lb ? la : (fa != fb ? fa > fb : a.spec.id < b.spec.id)) best = w;
    }
    if (best < 0) {
      if (ev.spec.priority == Priority::kP0) {
        // Rule 4: reserve one worker that could run this but is busy with P3 work.
        bool reserved = false;
        for (const auto& w : workers_) reserved |= w.reserved_for == e;
        for (int w = 0; w < static_cast<int>(workers_.size()) && !reserved; ++w) {
          WorkerEntry& we = workers_[w];
          if (!we.alive || we.reserved_for >= 0 || we.spec.pool != ev.spec.requirements.pool ||
              we.spec.memory_mib < ev.spec.requirements.memory_mib ||
              (!we.spec.evaluators.empty() && !ev.spec.evaluator.empty() &&
               std::find(we.spec.evaluators.begin(), we.spec.evaluators.end(), ev.spec.evaluator) ==
                   we.spec.evaluators.end()))
            continue;
          std::string p3;
          for (const auto& [le, lp] : we.leases) {
            if (evals_[le].spec.priority == Priority::kP3)
              p3 = evals_[le].spec.evaluation_id + "/" + std::to_string(lp);
          }
          if (p3.empty()) continue;
          we.reserved_for = e;
          reserved = true;
          counters_.preemptions++;
          log(e, now_ms, -1,
              "P0 preempts P3 work at a shard boundary: worker " + we.spec.id + " finishes its P3 shard " + p3 +
                  " (shards are never killed), then takes only P0 work");
          const auto [pe, pp] = *we.leases.begin();
          log(pe, now_ms, pp,
              "worker " + we.spec.id + " drains for P0 evaluation " + ev.spec.evaluation_id +
                  ": this shard finishes, the next ones wait for another worker");
        }
      }
      // Every shard of this evaluation has the same requirements: skip to the next evaluation.
      it = queue_.lower_bound({prio, deadline, e + 1, std::numeric_limits<int>::min()});
      continue;
    }
    WorkerEntry& w = workers_[best];
    ShardEntry& sh = ev.shards[partition];
    // The reason, before the state changes.
    std::string text =
        "shard " + std::to_string(partition) + " of " + ev.spec.evaluation_id + " went to worker " + w.spec.id;
    if (sh.attempts > 0)
      text += " (attempt " + std::to_string(sh.attempts + 1) + " of " + std::to_string(ev.spec.max_attempts) + ")";
    text += ": " + order_reason(e);
    const bool local = has_loaded(w, ev.spec.checkpoint_id);
    if (local)
      text += "; " + w.spec.id + " has checkpoint " + ev.spec.checkpoint_id + " loaded";
    else
      text += "; no free eligible worker has checkpoint " + ev.spec.checkpoint_id + " loaded, " + w.spec.id + " has " +
              std::to_string(w.spec.slots - w.running) + " free of " + std::to_string(w.spec.slots) + " slots";
    if (w.reserved_for == e) text += "; " + w.spec.id + " was reserved for this P0 evaluation";
    int listed = 0, unlisted = 0;
    for (const auto& other : workers_) {
      if (&other == &w) continue;
      std::string r = rejection(other, ev);
      if (r.empty() && local && !has_loaded(other, ev.spec.checkpoint_id))
        r = other.spec.id + " does not have it loaded";
      if (r.empty()) continue;
      if (listed < 4)
        text += "; " + r, ++listed;
      else
        ++unlisted;
    }
    if (unlisted) text += "; and " + std::to_string(unlisted) + " more workers";
    log(e, now_ms, partition, std::move(text));

    it = queue_.erase(it);
    dequeued(e);
    ev.running++;
    sh.state = ShardState::kRunning;
    sh.attempts++;
    sh.worker = best;
    sh.last_worker = w.spec.id;
    w.running++;
    w.leases.insert({e, partition});
    if (!local && !ev.spec.checkpoint_id.empty()) {
      w.loaded.push_back(ev.spec.checkpoint_id);  // the worker loads it for this shard
      if (w.loaded.size() > 2) w.loaded.erase(w.loaded.begin());
    }
    if (w.reserved_for == e || (ev.spec.priority == Priority::kP0 && w.reserved_for >= 0)) w.reserved_for = -1;
    counters_.assigned++;
    out.push_back(Assignment{ev.spec.evaluation_id, partition, ev.spec.shards[partition].items, sh.attempts, w.spec.id,
                             ev.spec.checkpoint_id});
    if (ev.queued == 0) clear_reservations(e);
    update_status(e, now_ms);
    any_free = free_slots();
  }
  return out;
}

void Scheduler::clear_reservations(int e) {
  for (auto& w : workers_) {
    if (w.reserved_for == e) w.reserved_for = -1;
  }
}

bool Scheduler::can_accept(const std::string& evaluation_id, int partition, int attempt) const {
  const EvalEntry* ev = find(evaluation_id);
  if (!ev || partition < 0 || partition >= static_cast<int>(ev->shards.size())) return false;
  const ShardEntry& sh = ev->shards[partition];
  if (sh.state != ShardState::kQueued && sh.state != ShardState::kRunning) return false;
  return attempt >= 1 && attempt <= sh.attempts;
}

void Scheduler::release_lease(int e, int partition, int64_t now_ms) {
  ShardEntry& sh = evals_[e].shards[partition];
  if (sh.state == ShardState::kRunning) {
    evals_[e].running--;
  } else if (sh.state == ShardState::kQueued) {
    queue_.erase(key_of(e, partition));
    dequeued(e);
  }
  if (sh.worker >= 0) {
    WorkerEntry& w = workers_[sh.worker];
    if (w.leases.erase({e, partition})) w.running--;
    sh.worker = -1;
  }
}

Completion Scheduler::complete(const std::string& evaluation_id, int partition, int attempt, const std::string& worker,
                               int64_t now_ms) {
  auto it = index_.find(evaluation_id);
  if (it == index_.end() || partition < 0 || partition >= static_cast<int>(evals_[it->second].shards.size())) {
    counters_.rejected++;
    return Completion::kRejected;
  }
  const int e = it->second;
  EvalEntry& ev = evals_[e];
  ShardEntry& sh = ev.shards[partition];
  auto wi = worker_index_.find(worker);
  if (sh.state == ShardState::kDone || sh.state == ShardState::kCached) {
    // A repeat or a late result: free the slot if this worker still held a lease on it.
    if (wi != worker_index_.end() && workers_[wi->second].leases.erase({e, partition})) workers_[wi->second].running--;
    counters_.duplicates++;
    log(e, now_ms, partition,
        "duplicate result for shard " + std::to_string(partition) + " (attempt " + std::to_string(attempt) + " from " +
            worker + ") ignored: the shard is done");
    return Completion::kDuplicate;
  }
  if (!can_accept(evaluation_id, partition, attempt)) {
    counters_.rejected++;
    log(e, now_ms, partition,
        "result for shard " + std::to_string(partition) + " (attempt " + std::to_string(attempt) + " from " + worker +
            ") rejected: the shard is " + std::string(shard_state_name(sh.state)) + " and " +
            std::to_string(sh.attempts) + " attempts were issued");
    return Completion::kRejected;
  }
  std::string note;
  if (attempt != sh.attempts)
    note = " (a late result of attempt " + std::to_string(attempt) + "; attempt " + std::to_string(sh.attempts) +
           (sh.state == ShardState::kRunning ? " on " + sh.last_worker + " is cancelled)"
                                             : " was lost; the queued retry is dropped)");
  release_lease(e, partition, now_ms);
  if (wi != worker_index_.end() && workers_[wi->second].leases.erase({e, partition})) workers_[wi->second].running--;
  sh.state = ShardState::kDone;
  ev.done++;
  counters_.completed++;
  log(e, now_ms, partition, "shard " + std::to_string(partition) + " done by " + worker + note);
  update_status(e, now_ms);
  return Completion::kAccepted;
}

void Scheduler::fail(const std::string& evaluation_id, int partition, int attempt, const std::string& worker,
                     const std::string& reason, int64_t now_ms, bool retryable) {
  auto it = index_.find(evaluation_id);
  if (it == index_.end() || partition < 0 || partition >= static_cast<int>(evals_[it->second].shards.size())) return;
  const int e = it->second;
  ShardEntry& sh = evals_[e].shards[partition];
  auto wi = worker_index_.find(worker);
  const bool current = sh.state == ShardState::kRunning && attempt == sh.attempts && wi != worker_index_.end() &&
                       sh.worker == wi->second;
  if (!current) {  // a stale attempt failing changes nothing but its slot
    if (wi != worker_index_.end() && workers_[wi->second].leases.erase({e, partition})) workers_[wi->second].running--;
    return;
  }
  requeue_or_fail(e, partition, now_ms,
                  "shard " + std::to_string(partition) + " attempt " + std::to_string(attempt) + " on " + worker +
                      " failed: " + reason + (retryable ? "" : " (not retryable)"),
                  retryable);
}

void Scheduler::requeue_or_fail(int e, int partition, int64_t now_ms, const std::string& why, bool retry) {
  EvalEntry& ev = evals_[e];
  ShardEntry& sh = ev.shards[partition];
  release_lease(e, partition, now_ms);
  if (retry && sh.attempts - sh.prior < ev.spec.max_attempts) {
    enqueue(e, partition);
    counters_.retried++;
    log(e, now_ms, partition,
        why + "; retried elsewhere (attempt " + std::to_string(sh.attempts + 1) + " of " +
            std::to_string(ev.spec.max_attempts + sh.prior) + " queued)");
  } else {
    sh.state = ShardState::kFailed;
    ev.failed++;
    counters_.failed_shards++;
    log(e, now_ms, partition,
        why + "; shard " + std::to_string(partition) + " " + ev.spec.shards[partition].items.str() + " failed after " +
            std::to_string(sh.attempts) + " of " + std::to_string(ev.spec.max_attempts + sh.prior) + " attempts");
    if (ev.queued == 0) clear_reservations(e);
  }
  update_status(e, now_ms);
}

void Scheduler::lose_worker(int w, int64_t now_ms, const std::string& why) {
  WorkerEntry& we = workers_[w];
  we.alive = false;
  we.reserved_for = -1;
  counters_.workers_lost++;
  const auto leases = we.leases;  // requeue_or_fail edits the set
  for (const auto& [e, partition] : leases) {
    requeue_or_fail(e, partition, now_ms,
                    why + ": lost shard " + std::to_string(partition) + " (attempt " +
                        std::to_string(evals_[e].shards[partition].attempts) + ")");
  }
  we.leases.clear();
  we.running = 0;
  we.loaded.clear();
}

std::vector<std::string> Scheduler::expire(int64_t now_ms) {
  std::vector<std::string> lost;
  for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
    WorkerEntry& we = workers_[w];
    if (!we.alive || now_ms - we.last_heartbeat_ms <= options_.heartbeat_timeout_ms) continue;
    lost.push_back(we.spec.id);
    lose_worker(w, now_ms,
                "worker " + we.spec.id + " missed heartbeats for " + seconds(now_ms - we.last_heartbeat_ms) +
                    " (timeout " + seconds(options_.heartbeat_timeout_ms) + ")");
  }
  return lost;
}

void Scheduler::update_status(int e, int64_t now_ms) {
  EvalEntry& ev = evals_[e];
  const int total = static_cast<int>(ev.shards.size());
  EvalStatus s;
  if (ev.cached == total)
    s = EvalStatus::kCached;
  else if (ev.done + ev.cached + ev.failed == total)
    s = ev.failed == 0 ? EvalStatus::kCompleted
                       : (ev.done + ev.cached > 0 ? EvalStatus::kPartial : EvalStatus::kFailed);
  else if (ev.running + ev.done > 0 || ev.failed > 0)
    s = EvalStatus::kRunning;
  else
    s = EvalStatus::kQueued;
  if (s == ev.status) return;
  ev.status = s;
  if (!is_terminal(s)) return;
  std::string text = "evaluation " + ev.spec.evaluation_id + " is " + std::string(eval_status_name(s)) + ": " +
                     std::to_string(ev.done) + " shards done, " + std::to_string(ev.cached) + " cached, " +
                     std::to_string(ev.failed) + " failed";
  if (ev.failed) {
    text += " (missing shards:";
    for (int i : missing_shards(ev.spec.evaluation_id))
      text += " " + std::to_string(i) + " " + ev.spec.shards[i].items.str();
    text += ")";
  }
  log(e, now_ms, -1, text);
}

EvalStatus Scheduler::status(const std::string& evaluation_id) const {
  const EvalEntry* ev = find(evaluation_id);
  RUNLENS_CHECK(ev, "status() of an evaluation the scheduler does not know: " + evaluation_id);
  return ev->status;
}

ShardState Scheduler::shard_state(const std::string& evaluation_id, int partition) const {
  const EvalEntry* ev = find(evaluation_id);
  RUNLENS_CHECK(ev && partition >= 0 && partition < static_cast<int>(ev->shards.size()),
                "shard_state() of an unknown shard of " + evaluation_id);
  return ev->shards[partition].state;
}

std::vector<int> Scheduler::missing_shards(const std::string& evaluation_id) const {
  std::vector<int> out;
  const EvalEntry* ev = find(evaluation_id);
  if (!ev) return out;
  for (size_t i = 0; i < ev->shards.size(); ++i) {
    if (ev->shards[i].state == ShardState::kFailed) out.push_back(static_cast<int>(i));
  }
  return out;
}

int Scheduler::shards_done(const std::string& evaluation_id) const {
  const EvalEntry* ev = find(evaluation_id);
  return ev ? ev->done + ev->cached : 0;
}

int Scheduler::shard_count(const std::string& evaluation_id) const {
  const EvalEntry* ev = find(evaluation_id);
  return ev ? static_cast<int>(ev->shards.size()) : 0;
}

std::vector<std::string> Scheduler::why(const std::string& evaluation_id) const {
  std::vector<std::string> out;
  const EvalEntry* ev = find(evaluation_id);
  if (!ev) return out;
  for (const auto& d : ev->log) out.push_back(d.str());
  return out;
}

}  // namespace runlens::eval
