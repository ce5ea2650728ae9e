#!/usr/bin/env python3
"""Accuracy of runlens's diagnoses (and of the symptom alerts under them) over
the synthetic failure library: every failure class of `runlens synth`, over
several seeds, fault steps and ranks, replayed through the default pipeline.

    /usr/bin/python3 tools/accuracy.py                     # writes docs/accuracy.md
    /usr/bin/python3 tools/accuracy.py --seeds 3 --out -   # quicker, to stdout

Per failure class:
  diagnosis recall     runs with a diagnosis of the expected cause and owner, at
                       the fault's place (rank or node), onset within tolerance
  diagnosis precision  such correct diagnoses / all diagnoses in the class's runs
                       (a repeated alert_id is one diagnosis: its highest
                       revision wins)
  diagnosis delay      steps from the fault's first step to the step the run had
                       reached when the diagnosis was first published with its
                       final cause and owner (the earliest such revision)
  symptom recall       runs with an alert of the class's symptom kind at the
                       fault's place, raised within 10 steps of the fault
  symptom precision    alerts of the kinds the fault explains / all alerts
  symptom delay        steps from the fault's first step to the symptom
                       alert's step
Healthy runs count false diagnoses and alerts.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

RANKS, GPUS_PER_NODE, STEPS = 32, 8, 150
# Run i of a class: its rank, GPU/node sampling interval (steps) and pause rate.
RANK_OF_RUN = [13, 5, 22, 30, 9, 18, 27, 2]
GPU_EVERY_OF_RUN = [2, 5, 10]
PAUSE_RATE_OF_RUN = [0.005, 0.01]
SYMPTOM_WINDOW = 10  # steps after the fault within which the symptom must come


def node_of(rank):
    return "gpu-node-%d" % (rank // GPUS_PER_NODE)


# name: (faults, primary symptom kind, kinds the fault explains, cause, owner,
#        place: "rank" | "node" | "run" | "rank0" | "shard",
#        onset tolerance: (steps before, steps after, GPU sample intervals after))
# A one-step pause of the same rank just before the fault may open the
# incident a step early; faults seen only in GPU samples (power cap, ECC) show
# one or two sample intervals late (gpu_health wants 2 of 3 samples).
# host_contention shows in node samples, one interval late at most; the
# throughput drop it causes joins its incident and may date its onset a step
# before the fault (throughput_regression's change point).
# The symptom must come within SYMPTOM_WINDOW steps of the fault, or within
# SLOW_SYMPTOMS[name] for faults that take longer to show.
SLOW_SYMPTOMS = {"slow_checkpoint": 55}  # two slow checkpoints, 50 steps apart
CLASSES = [
    ("straggler", ["straggler:rank={r},from={s}"], "straggler", {"straggler", "throughput_drop"},
     "unknown", "infrastructure", "rank", (1, 2, 0)),
    ("thermal", ["thermal:rank={r},from={s}"], "straggler", {"straggler", "throughput_drop", "thermal_throttle"},
     "hardware_throttle", "infrastructure", "rank", (1, 2, 0)),
    ("power_cap", ["power_cap:rank={r},from={s}"], "power_throttle", {"power_throttle", "job_slowdown"},
     "hardware_throttle", "infrastructure", "rank", (0, 2, 2)),
    ("host_cpu", ["host_cpu:rank={r},from={s}"], "data_starvation", {"data_starvation", "host_bottleneck"},
     "host_bottleneck", "infrastructure", "node", (0, 2, 0)),
    ("slow_shard", ["slow_shard:rank={r},from={s}"], "data_starvation", {"data_starvation"},
     "data_pipeline", "data", "shard", (0, 2, 0)),
    ("network", ["network:from={s},rank={r}"], "comm_bottleneck", {"comm_bottleneck", "throughput_drop"},
     "network", "network", "run", (0, 2, 0)),
    ("oom", ["oom:rank={r},step={s}"], "oom", {"oom", "memory_pressure"},
     "memory", "training", "rank", (5, 0, 0)),
    ("xid", ["xid:rank={r},step={s}"], "xid_error", {"xid_error", "rank_missing"},
     "hardware_fault", "infrastructure", "rank", (0, 0, 0)),
    ("ecc", ["ecc:rank={r},from={s}"], "ecc_uncorrected", {"ecc_uncorrected"},
     "hardware_fault", "infrastructure", "rank", (0, 2, 1)),
    ("missing_rank", ["missing_rank:rank={r},from={s}"], "rank_missing", {"rank_missing"},
     "hardware_fault", "infrastructure", "rank", (0, 0, 0)),
    ("clock_low", ["clock_low:rank={r},from={s}"], "straggler", {"straggler", "throughput_drop", "clock_low"},
     "hardware_throttle", "infrastructure", "rank", (1, 2, 0)),
    ("nvlink", ["nvlink:rank={r},from={s}"], "nvlink_error", {"nvlink_error", "comm_bottleneck", "throughput_drop"},
     "hardware_fault", "infrastructure", "rank", (0, 2, 1)),
    ("pcie_replay", ["pcie_replay:rank={r},from={s}"], "pcie_replay", {"pcie_replay"},
     "hardware_fault", "infrastructure", "rank", (0, 2, 1)),
    ("config_slowdown", ["config_slowdown:step={s}"], "mfu_drop", {"mfu_drop", "throughput_drop"},
     "config_change", "training", "run", (0, 2, 0)),
    ("slow_checkpoint", ["slow_checkpoint:from={c}"], "checkpoint_overhead", {"checkpoint_overhead"},
     "checkpoint", "platform", "run", (0, 0, 0)),
    ("checkpoint_failure", ["checkpoint_failure:step={c}"], "checkpoint_failure", {"checkpoint_failure"},
     "checkpoint", "platform", "run", (0, 0, 0)),
    ("nan", ["nan:step={s}"], "nan_loss", {"nan_loss"},
     "training_instability", "training", "rank0", (0, 0, 0)),
    ("lr_change", ["lr_change:step={s},factor=20"], "grad_spike", {"grad_spike", "loss_spike"},
     "config_change", "training", "rank0", (0, 0, 0)),
    ("lr_change+nan", ["lr_change:step={s},factor=20", "nan:step={s10}"], "grad_spike",
     {"grad_spike", "loss_spike", "nan_loss"}, "config_change", "training", "rank0", (0, 0, 0)),
    ("host_contention", ["host_contention:rank={r},from={s}"], "host_bottleneck",
     {"host_bottleneck", "straggler", "throughput_drop", "job_slowdown"}, "host_bottleneck", "infrastructure", "node",
     (1, 2, 1)),
    # Real fleets (issue 14): two speed groups from the first step; a jump of two
    # ranks of the slow group (the jump's ranks are in the slow group: see
    # SHAPES); healthy runs at 8 and 1024 ranks, and with 4x the pauses.
    ("speed_groups", ["speed_groups"], "rank_heterogeneity", {"rank_heterogeneity"},
     "heterogeneous_fleet", "platform", "run", (0, 0, 0)),
    ("group_jump", ["speed_groups", "straggler:rank={r},from={s},factor=4", "straggler:rank={r2},from={s},factor=4.5"],
     "straggler", {"straggler", "throughput_drop", "rank_heterogeneity"}, "unknown", "infrastructure", "ranks",
     (1, 2, 0)),
    ("slowdown", ["slowdown:rank={r},from={s}"], "job_slowdown", {"job_slowdown", "throughput_drop"}, "unknown",
     "infrastructure", "run", (0, 2, 0)),
    ("healthy", [], None, set(), None, None, "run", (0, 0, 0)),
    ("noise", [], None, set(), None, None, "run", (0, 0, 0)),
    ("healthy-8", [], None, set(), None, None, "run", (0, 0, 0)),
    ("noise-8", [], None, set(), None, None, "run", (0, 0, 0)),
    ("healthy-1024", [], None, set(), None, None, "run", (0, 0, 0)),
    ("noise-1024", [], None, set(), None, None, "run", (0, 0, 0)),
]

# Per-class departures from the common setup: "ranks" (the job's size),
# "pauses" (one-step pause rate, instead of PAUSE_RATE_OF_RUN), "slow_group"
# (the faulted ranks are drawn from the slow speed group: ranks 16-31 of 32),
# "at_start" (the fault is there from the first step), "also" (other
# diagnoses that are right in the class's runs: (cause, owner, place)).
SHAPES = {
    "speed_groups": {"at_start": True},
    "group_jump": {"slow_group": True, "also": [("heterogeneous_fleet", "platform", "run")]},
    "noise": {"pauses": 0.04},
    "healthy-8": {"ranks": 8},
    "noise-8": {"ranks": 8, "pauses": 0.04},
    "healthy-1024": {"ranks": 1024},
    "noise-1024": {"ranks": 1024, "pauses": 0.04},
}


def fault_step(i):
    return 60 + 4 * i


def checkpoint_step(i):
    return 50  # checkpoints come every 50 steps (synth's default)


def run_one(binary, workdir, cls, seed_index, seed):
    name, faults, *_ = cls
    shape = SHAPES.get(name, {})
    ranks = shape.get("ranks", RANKS)
    rank = RANK_OF_RUN[seed_index % len(RANK_OF_RUN)]
    rank2 = None
    if shape.get("slow_group"):
        rank, rank2 = RANKS // 2 + rank % (RANKS // 2), RANKS // 2 + (rank + 5) % (RANKS // 2)
    gpu_every = GPU_EVERY_OF_RUN[seed_index % len(GPU_EVERY_OF_RUN)]
    pause_rate = shape.get("pauses", PAUSE_RATE_OF_RUN[seed_index % len(PAUSE_RATE_OF_RUN)])
    step = 1 if shape.get("at_start") else fault_step(seed_index)
    cstep = checkpoint_step(seed_index)
    tag = "%s-%d" % (name.replace("+", "_"), seed)
    path = os.path.join(workdir, tag + ".jsonl")
    out = os.path.join(workdir, tag)
    args = [binary, "synth", "--ranks", str(ranks), "--gpus-per-node", str(GPUS_PER_NODE), "--steps", str(STEPS),
            "--gpu-every", str(gpu_every), "--gc-pause-rate", str(pause_rate), "--seed", str(seed), "--run-id", tag,
            "--out", path]
    for f in faults:
        args += ["--fault", f.format(r=rank, r2=rank2, s=step, c=cstep, s10=step + 10)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([binary, "replay", path, "--quiet", "--threads", "1", "--out", out, "--set",
                    "RUNLENS_PUBLISH=ipc://" + os.path.join(workdir, tag + ".sock")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    alerts = []
    with open(os.path.join(out, "alerts.jsonl")) as f:
        for line in f:
            if line.strip():
                alerts.append(json.loads(line))
    # When each step completed (its last rank report): event time -> step.
    done = {}
    with open(path) as f:
        for line in f:
            if '"type":"step"' not in line:
                continue
            e = json.loads(line)
            done[e["step"]] = max(done.get(e["step"], 0), e["time_ns"])
    completions = sorted((t, s) for s, t in done.items())
    os.remove(path)
    shutil.rmtree(out, ignore_errors=True)
    fault = cstep if name in ("slow_checkpoint", "checkpoint_failure") else step
    return {"class": name, "seed": seed, "rank": rank, "ranks": [rank] + ([rank2] if rank2 is not None else []),
            "gpu_every": gpu_every, "fault_step": fault, "alerts": alerts, "completions": completions}


def step_at(completions, time_ns):
    last = 0
    for t, s in completions:
        if t > time_ns:
            break
        last = s
    return last


def place_ok(place, a, rank, ranks=()):
    if place == "run":
        return "rank" not in a
    if place == "ranks":  # one of the faulted ranks
        return any(place_ok("rank", a, r) for r in ranks)
    if place == "rank":
        return a.get("rank") == rank and a.get("node") == node_of(rank) and a.get("gpu") == rank % GPUS_PER_NODE
    if place == "node":
        return a.get("node") == node_of(rank)
    if place == "rank0":
        return a.get("rank") == 0
    if place == "shard":  # ranks reading the rank's shard (one shard per two ranks: r and r + 16)
        return a.get("rank") in (rank % (RANKS // 2), rank % (RANKS // 2) + RANKS // 2)
    return False


def final_diagnoses(alerts):
    """The highest revision of each alert_id, in the order of first publication,
    each with "first_time_ns": since when its revisions have had the final cause and owner."""
    revisions, order = {}, []
    for a in alerts:
        if a["kind"] != "diagnosis":
            continue
        if a["alert_id"] not in revisions:
            order.append(a["alert_id"])
            revisions[a["alert_id"]] = []
        revisions[a["alert_id"]].append(a)
    out = []
    for i in order:
        seq = sorted(revisions[i], key=lambda a: a.get("revision", 0))
        final, first = seq[-1], seq[-1]["time_ns"]
        for a in reversed(seq):  # the revisions since which the cause and owner have been the final ones
            if (a["cause"], a["owner"]) != (final["cause"], final["owner"]):
                break
            first = a["time_ns"]
        out.append(dict(final, first_time_ns=first))
    return out


def judge(cls, run):
    name, _, symptom, related, cause, owner, place, (before, after, samples) = cls
    fault, rank = run["fault_step"], run["rank"]
    after += samples * run["gpu_every"]
    diagnoses = final_diagnoses(run["alerts"])
    # A symptom alert published again (asof_join's refined context) is one alert: its highest revision.
    latest = {}
    for a in run["alerts"]:
        if a["kind"] != "diagnosis" and a.get("revision", 0) >= latest.get(a["alert_id"], {}).get("revision", -1):
            latest[a["alert_id"]] = a
    symptoms = list(latest.values())
    r = {"diagnoses": len(diagnoses), "correct": 0, "also": 0, "diag_delay": None, "wrong": [],
         "symptom_found": False, "symptom_delay": None, "alerts": len(symptoms),
         "revised": sum(1 for d in diagnoses if d.get("revision", 0) > 0),
         "related": sum(1 for a in symptoms if a["kind"] in related)}
    also = SHAPES.get(name, {}).get("also", [])
    for d in diagnoses:
        onset = d.get("attrs", {}).get("onset_step", -1)
        ok = (cause is not None and d["cause"] == cause and d["owner"] == owner
              and place_ok(place, d, rank, run["ranks"]) and fault - before <= onset <= fault + after)
        if not ok and any(d["cause"] == c and d["owner"] == o and place_ok(p, d, rank, run["ranks"])
                          for c, o, p in also):
            r["also"] += 1  # right, and not this class's fault: neither correct nor wrong
            continue
        if ok:
            r["correct"] += 1
            # The run had completed this step when the diagnosis came (a run that
            # stops at its fault, as an OOM does, counts from the fault itself).
            delay = max(0, step_at(run["completions"], d["first_time_ns"]) - fault)
            r["diag_delay"] = delay if r["diag_delay"] is None else min(r["diag_delay"], delay)
        else:
            why = []
            if d["cause"] != cause or d["owner"] != owner:
                why.append("cause %s / owner %s" % (d["cause"], d["owner"]))
            if cause is not None and not place_ok(place, d, rank, run["ranks"]):
                why.append("place rank %s node %s" % (d.get("rank"), d.get("node")))
            if cause is not None and not fault - before <= onset <= fault + after:
                why.append("onset_step %d, expected %d..%d" % (onset, fault - before, fault + after))
            r["wrong"].append("%s diagnosis at step %s: %s" % (d["symptom"], d.get("step"), "; ".join(why)))
    r["diagnoses"] -= r["also"]
    for a in symptoms:
        if a["kind"] != symptom or not place_ok(place, a, rank, run["ranks"]):
            continue
        s = a.get("step")
        if s is None or not (fault - before <= s <= fault + max(after, SLOW_SYMPTOMS.get(name, SYMPTOM_WINDOW))):
            continue
        r["symptom_found"] = True
        r["symptom_delay"] = s - fault if r["symptom_delay"] is None else min(r["symptom_delay"], s - fault)
    return r


def fmt_ratio(num, den):
    return "n/a" if den == 0 else "%.2f (%d/%d)" % (num / den, num, den)


def fmt_delay(values):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return "%g (%d..%d)" % (statistics.median(values), min(values), max(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runlens", default="build/runlens", help="the runlens binary")
    ap.add_argument("--seeds", type=int, default=5, help="runs per failure class")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once")
    ap.add_argument("--out", default="docs/accuracy.md", help="the report ('-': standard output)")
    ap.add_argument("--classes", nargs="+", help="only these failure classes (e.g. to try a new one)")
    a = ap.parse_args()
    classes = [c for c in CLASSES if not a.classes or c[0] in a.classes]
    if a.classes and len(classes) != len(a.classes):
        sys.exit("accuracy.py: unknown class in %s (known: %s)" % (a.classes, ", ".join(c[0] for c in CLASSES)))
    binary = os.path.abspath(a.runlens)
    if not os.access(binary, os.X_OK):
        sys.exit("accuracy.py: no runlens binary at %s (build it, or pass --runlens)" % binary)
    command = "/usr/bin/python3 tools/accuracy.py --runlens %s --seeds %d" % (a.runlens, a.seeds)
    workdir = tempfile.mkdtemp(prefix="runlens-accuracy-")
    jobs = [(cls, i, 1000 + 17 * i) for cls in classes for i in range(a.seeds)]
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            runs = list(pool.map(lambda j: (j[0], run_one(binary, workdir, j[0], j[1], j[2])), jobs))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rows, wrong = [], []
    totals = {"runs": 0, "tp": 0, "diagnoses": 0, "found": 0}
    for cls in classes:
        name, _, symptom, _, cause, owner, place, _ = cls
        judged = [(run, judge(cls, run)) for c, run in runs if c is cls]
        n = len(judged)
        tp = sum(1 for _, j in judged if j["correct"] > 0)
        diagnoses = sum(j["diagnoses"] for _, j in judged)
        correct = sum(j["correct"] for _, j in judged)
        alerts = sum(j["alerts"] for _, j in judged)
        related = sum(j["related"] for _, j in judged)
        found = sum(1 for _, j in judged if j["symptom_found"])
        revised = sum(j["revised"] for _, j in judged)
        for run, j in judged:
            for w in j["wrong"]:
                wrong.append("%s, seed %d (fault at step %d, rank %d): %s" % (name, run["seed"], run["fault_step"], run["rank"], w))
        if cause is None:
            rows.append("| %s | %d | none expected | %d false | | | | none expected | %d false | | |" %
                        (name, n, diagnoses, alerts))
            continue
        totals["runs"] += n
        totals["tp"] += tp
        totals["diagnoses"] += diagnoses
        totals["found"] += found
        rows.append("| %s | %d | %s / %s | %s | %s | %s | %d | `%s` | %s | %s | %s |" % (
            name, n, cause, owner, fmt_ratio(correct, diagnoses), fmt_ratio(tp, n),
            fmt_delay([j["diag_delay"] for _, j in judged]), revised, symptom, fmt_ratio(related, alerts), fmt_ratio(found, n),
            fmt_delay([j["symptom_delay"] for _, j in judged])))

    lines = [
        "# Diagnosis accuracy",
        "",
        "Generated by `%s` (run from the repository root; takes a few minutes)." % command,
        "Do not edit: rerun it after changing a detector, a rule or the synthetic fleet.",
        "",
        "Each failure class of `runlens synth` is injected into %d runs of a %d-rank job (%d GPUs per node,"
        " %d steps of ~2 s), run i with seed 1000 + 17 i, the fault at step 60 + 4 i (checkpoint faults at"
        " step 50) on rank 13, 5, 22, 30, 9, 18, 27, 2 (cycling), GPU and node samples every 2, 5, 10 steps"
        " (cycling) and one-step pauses on 0.5 %% or 1 %% of rank-steps (alternating), replayed through the"
        " embedded default pipeline (pipelines/training-health.yaml, configs/rules/)." % (
            a.seeds, RANKS, GPUS_PER_NODE, STEPS),
        "",
        "Real fleets (issue 14): **speed_groups**, ranks 16-31 (nodes 2 and 3) 2.5x slower than ranks 0-15 from the"
        " first step, each by its own 0.85..1.15 of it (`--fault speed_groups`), expects one rank_heterogeneity"
        " diagnosed `heterogeneous_fleet` and nothing else; **group_jump**, the same fleet with two ranks of the slow"
        " group 4x and 4.5x slower from the fault step (the run's ranks mapped into 16-31), expects a straggler"
        " diagnosis of each (the rank_heterogeneity's diagnosis is right there too, and counted neither way);"
        " **noise** runs have one-step pauses on 4 %% of rank-steps; **-8** and **-1024** rows are jobs of 8 ranks"
        " (one node) and 1024 ranks (128 nodes) with the same setup.",
        "",
        "* **Diagnosis precision**: diagnoses with the expected cause and owner, at the fault's place (its rank;"
        " its node for host_cpu and host_contention; a reader of its shard for slow_shard; rank 0, the train reporter, for training"
        " failures; run-wide for network, config and checkpoint faults) and with their onset_step at the fault's"
        " first step, up to 2 steps later (straggler, thermal, clock_low: also 1 step earlier, a pause of the"
        " same rank just before; oom: up to 5 steps earlier, when memory starts to fill; power_cap: up to 2 GPU"
        " sample intervals + 2 steps later, ecc, nvlink, pcie_replay: 1 interval + 2 steps, the samples that"
        " show them; host_contention: 1 interval + 2 steps later, the node samples, or 1 step earlier, the onset"
        " of the throughput drop that joins it), over all"
        " diagnoses of the class's runs (the last of each alert_id)."
        " **Recall**: runs with such a diagnosis.",
        "* **Delay**: median (min..max) steps from the fault's first step to the step the run had completed"
        " when the diagnosis was first published with its final cause and owner (revision 0 goes out with the"
        " symptom; the evaluation after the window, `after_steps` = 5 steps later, publishes a revision only when"
        " what a consumer sees changed), and to the step of the symptom alert.",
        "* **Symptom precision**: alerts of the kinds the fault explains (e.g. a straggler and the throughput"
        " drop it causes) over all alerts of the class's runs. **Symptom recall**: runs with the class's symptom"
        " alert at the fault's place within %d steps of it (or the onset tolerance above, if longer;"
        " slow_checkpoint: %d, the second slow checkpoint)." % (SYMPTOM_WINDOW, SLOW_SYMPTOMS["slow_checkpoint"]),
        "* **Revised**: diagnoses published again (revision > 0, same alert_id) because later evidence changed"
        " what a consumer sees: the cause (e.g. a straggler first unexplained, then its GPU's thermal_throttle"
        " alert, two samples later), the evidence or the symptom; the delay is that of the first revision with"
        " the final cause.",
        "",
        "| failure class | runs | expected cause / owner | diagnosis precision | diagnosis recall |"
        " diagnosis delay (steps) | revised | symptom | symptom precision | symptom recall | symptom delay (steps) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ] + rows + [
        "",
        "Over all failure classes: diagnosis recall %s; symptom recall %s; %d diagnoses in %d runs." % (
            fmt_ratio(totals["tp"], totals["runs"]), fmt_ratio(totals["found"], totals["runs"]),
            totals["diagnoses"], totals["runs"]),
        "",
        "Wrong or extra diagnoses:" if wrong else "No wrong or extra diagnoses.",
    ] + ["* " + w for w in wrong] + [""]
    text = "\n".join(lines)
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as f:
            f.write(text)
        print("wrote %s" % a.out)


if __name__ == "__main__":
    main()
