#include "tools/synth.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

namespace runlens::synth {

bool parse_fault(const std::string& text, Fault* f, std::string* error) {
  *f = Fault();
  size_t colon = text.find(':');
  f->kind = text.substr(0, colon);
  static const char* kKinds[] = {"straggler", "nan", "missing_rank", "gc_pause", "lr_change"};
  if (std::find(std::begin(kKinds), std::end(kKinds), f->kind) == std::end(kKinds)) {
    *error = "unknown fault '" + f->kind + "' (straggler, nan, missing_rank, gc_pause, lr_change)";
    return false;
  }
  if (colon == std::string::npos) return true;
  std::stringstream ss(text.substr(colon + 1));
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) return *error = "expected key=value in fault '" + text + "'", false;
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    try {
      if (k == "rank") f->rank = std::stoi(v);
      else if (k == "from") f->from_step = std::stoll(v);
      else if (k == "to") f->to_step = std::stoll(v);
      else if (k == "step") f->from_step = f->to_step = std::stoll(v);
      else if (k == "factor") f->factor = std::stod(v);
      else return *error = "unknown fault parameter '" + k + "' in '" + text + "'", false;
    } catch (...) {
      return *error = "invalid number '" + v + "' in fault '" + text + "'", false;
    }
  }
  return true;
}

namespace {
bool active(const Fault& f, int64_t step) { return step >= f.from_step && step <= f.to_step; }
}  // namespace

void generate(const Options& o, const std::function<void(std::vector<Record>&)>& sink) {
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  Symbol run = Symbol::intern(o.run_id);
  int32_t nodes = (o.ranks + o.gpus_per_node - 1) / o.gpus_per_node;
  std::vector<Symbol> node_names;
  for (int32_t n = 0; n < nodes; ++n) node_names.push_back(Symbol::intern("gpu-node-" + std::to_string(n)));

  std::vector<Record> out;
  int64_t t = o.start_ns;
  {
    auto rs = std::make_shared<RunStart>();
    rs->run_id = run;
    rs->world_size = o.ranks;
    rs->model_id = Symbol::intern("llama-x-7b");
    rs->dataset_version = Symbol::intern("v42");
    rs->gpu_peak_flops = 989e12;
    rs->model_flops_per_token = 6 * 7e9;
    rs->config = {{"lr", Value::of(3e-4)}, {"global_batch", Value::of(1024.0)}, {"optimizer", Value::of(std::string("adamw"))}};
    for (int32_t r = 0; r < o.ranks; ++r) rs->ranks.push_back({r, node_names[r / o.gpus_per_node], r % o.gpus_per_node});
    for (auto f : {RunStart::F::run_id, RunStart::F::world_size, RunStart::F::model_id, RunStart::F::dataset_version,
                   RunStart::F::gpu_peak_flops, RunStart::F::model_flops_per_token, RunStart::F::config,
                   RunStart::F::ranks}) {
      rs->set_present(f);
    }
    Record r;
    r.time_ns = t;
    r.body = std::shared_ptr<const RunStart>(std::move(rs));
    out.push_back(std::move(r));
    sink(out);
    out.clear();
  }
  t += 5'000'000'000;  // start-up

  std::vector<double> work(static_cast<size_t>(o.ranks));
  double loss = 3.5;
  double lr_scale = 1.0;
  bool diverged = false;
  const int64_t seq_len = 4096, micro_batch = 4;
  for (int64_t step = 1; step <= o.steps; ++step) {
    // Per-rank work: noise, rare one-step pauses, and injected stragglers.
    for (int32_t r = 0; r < o.ranks; ++r) {
      double w = o.step_ms * (1.0 + o.jitter * noise(rng));
      if (uni(rng) < o.gc_pause_rate) w *= 1.6;
      for (const auto& f : o.faults) {
        if ((f.kind == "straggler") && f.rank == r && active(f, step)) w *= f.factor;
        if (f.kind == "gc_pause" && f.rank == r && active(f, step)) w *= 1.8;
      }
      work[static_cast<size_t>(r)] = std::max(1.0, w);
    }
    double slowest = *std::max_element(work.begin(), work.end());
    double allreduce = 120 + 10 * uni(rng);
    double step_wall = slowest + allreduce + 15;
    t += static_cast<int64_t>(step_wall * 1e6);

    for (int32_t r = 0; r < o.ranks; ++r) {
      bool missing = false;
      for (const auto& f : o.faults) missing |= f.kind == "missing_rank" && f.rank == r && step >= f.from_step;
      if (missing) continue;
      double w = work[static_cast<size_t>(r)];
      double data_wait = 5 + 10 * uni(rng);
      Step s;
      s.run_id = run;
      s.rank = r;
      s.step = step;
      s.data_wait_ms = data_wait;
      s.forward_ms = w * 0.33;
      s.backward_ms = w * 0.57;
      s.optimizer_ms = w * 0.10;
      s.comm_ms = slowest - w + allreduce;
      s.step_ms = s.forward_ms + s.backward_ms + s.optimizer_ms + s.comm_ms + data_wait;
      s.tokens = seq_len * micro_batch;
      s.seq_len = seq_len;
      for (auto f : {Step::F::run_id, Step::F::rank, Step::F::step, Step::F::step_ms, Step::F::forward_ms,
                     Step::F::backward_ms, Step::F::optimizer_ms, Step::F::comm_ms, Step::F::data_wait_ms,
                     Step::F::tokens, Step::F::seq_len}) {
        s.set_present(f);
      }
      Record rec;
      rec.time_ns = t + static_cast<int64_t>(uni(rng) * 2e6);  // ranks report within 2 ms
      rec.body = s;
      out.push_back(std::move(rec));
    }

    // Training metrics from rank 0: warm-up then cosine LR, decaying loss.
    double warm = std::min(1.0, static_cast<double>(step) / 50.0);
    double cosine = 0.5 * (1 + std::cos(M_PI * static_cast<double>(step) / static_cast<double>(o.steps + 1)));
    for (const auto& f : o.faults) {
      if (f.kind == "lr_change" && step == f.from_step) lr_scale *= f.factor;
    }
    double lr = 3e-4 * warm * (0.1 + 0.9 * cosine) * lr_scale;
    loss = std::max(1.5, loss * 0.995 + 0.01 * noise(rng));
    double grad_norm = 0.8 + 0.05 * noise(rng);
    bool nan_now = false;
    for (const auto& f : o.faults) nan_now |= f.kind == "nan" && step >= f.from_step;
    if (lr_scale > 5 && !diverged) grad_norm *= 40, loss *= 3;
    Train tr;
    tr.run_id = run;
    tr.step = step;
    tr.rank = 0;
    tr.loss = nan_now ? std::numeric_limits<double>::quiet_NaN() : loss;
    tr.lr = lr;
    tr.grad_norm = nan_now ? std::numeric_limits<double>::infinity() : grad_norm;
    for (auto f : {Train::F::run_id, Train::F::step, Train::F::rank, Train::F::loss, Train::F::lr, Train::F::grad_norm}) {
      tr.set_present(f);
    }
    diverged |= nan_now;
    Record rec;
    rec.time_ns = t + 3'000'000;
    rec.body = tr;
    out.push_back(std::move(rec));

    if (o.gpu_every > 0 && step % o.gpu_every == 0) {
      for (int32_t n = 0; n < nodes; ++n) {
        for (int32_t g = 0; g < o.gpus_per_node && n * o.gpus_per_node + g < o.ranks; ++g) {
          Gpu s;
          s.node = node_names[n];
          s.gpu = g;
          s.util_pct = 95 + 3 * noise(rng);
          s.temp_c = 70 + 3 * noise(rng);
          s.power_w = 680 + 15 * noise(rng);
          s.power_limit_w = 700;
          s.sm_clock_mhz = 1980;
          s.mem_used_bytes = 77LL << 30;
          s.mem_total_bytes = 80LL << 30;
          for (auto f : {Gpu::F::node, Gpu::F::gpu, Gpu::F::util_pct, Gpu::F::temp_c, Gpu::F::power_w,
                         Gpu::F::power_limit_w, Gpu::F::sm_clock_mhz, Gpu::F::mem_used_bytes, Gpu::F::mem_total_bytes}) {
            s.set_present(f);
          }
          Record gr;
          gr.time_ns = t + 4'000'000 + g;
          gr.body = s;
          out.push_back(std::move(gr));
        }
        NodeSample ns;
        ns.node = node_names[n];
        ns.cpu_pct = 35 + 5 * uni(rng);
        ns.set_present(NodeSample::F::node);
        ns.set_present(NodeSample::F::cpu_pct);
        Record nr;
        nr.time_ns = t + 4'500'000;
        nr.body = ns;
        out.push_back(std::move(nr));
      }
    }
    std::stable_sort(out.begin(), out.end(), [](const Record& a, const Record& b) { return a.time_ns < b.time_ns; });
    sink(out);
    out.clear();
  }
  RunEnd end;
  end.run_id = run;
  end.status = Symbol::intern("completed");
  end.set_present(RunEnd::F::run_id);
  end.set_present(RunEnd::F::status);
  Record rec;
  rec.time_ns = t + 60'000'000'000;
  rec.body = end;
  out.push_back(std::move(rec));
  sink(out);
}

}  // namespace runlens::synth
