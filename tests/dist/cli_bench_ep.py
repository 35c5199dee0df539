#!/usr/bin/env python3
"""`kimi bench --ep N` (tests/dist/CMakeLists.txt registers it; docs/ep.md).

Under `mpirun -np 2` on random k3-tiny and kimi-linear-tiny (--random NAME), -p 8 -n 3 -b 1,3 -r 2, --json on stdout
and --csv to a file: every row (pp8, tg3 at b = 1 and 3 per rank) is present once and carries its EP numbers; the
pairs equal the independent count N * b * tokens * K * MoE layers * runs (every pair computed exactly once); the
per-rank loads sum to the pairs and each MoE layer step is planned to floor/ceil(P/N), so the averaged
slowest/mean after planning is ceil(P/N) / (P/N) and not above the home imbalance; the job's tokens/s is N times
one rank's; the max over ranks of each phase time is >= rank 0's; the CSV has the same rows and the EP columns; only
rank 0 reports (one table on stderr, one JSON object). `--ep 1` without mpirun: one rank, nothing moved, balanced.
Errors (named flag, expected vs actual): --ep other than the world size, negative, more ranks than experts, with
--device cuda, --profile or --chip h200; ranks that made different models end the job with the cause.
Usage: cli_bench_ep.py KIMI MPIEXEC [FLAGS...]
"""
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

KIMI, MPIEXEC, FLAGS = sys.argv[1], sys.argv[2], sys.argv[3:]
# Both named configs (src/model/config.cpp): 9 layers, layer 0 dense -> 8 MoE layers, 16 experts, top-4.
MOE_LAYERS, TOP_K, EXPERTS = 8, 4, 16
P, N_GEN, BATCHES, REPS = 8, 3, [1, 3], 2


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if expect_ok and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} returned {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def bench_args(name, ep, extra=()):
    return ["bench", "--random", name, "--threads", "1", "-p", str(P), "-n", str(N_GEN), "-b",
            ",".join(map(str, BATCHES)), "-r", str(REPS), "--warmup", "1", "--ep", str(ep), *extra]


def check_rows(tag, j, ranks, failures):
    def fail(msg):
        failures.append(f"{tag}: {msg}")

    if j.get("ep", {}).get("ranks") != ranks or j["ep"].get("batch_is_per_rank") is not True:
        fail(f"top-level ep {j.get('ep')}")
    want = [(f"pp{P}", b) for b in BATCHES] + [(f"tg{N_GEN}", b) for b in BATCHES]
    got = [(r["test"], r["batch"]) for r in j["rows"]]
    if got != want:
        fail(f"rows {got} != {want}")
    for r in j["rows"]:
        ep, row = r["ep"], f"{r['test']} b{r['batch']}"
        steps = 1 if r["kind"] == "pp" else r["n"]
        tokens_per_step = r["batch"] * (r["n"] if r["kind"] == "pp" else 1)  # per rank
        pairs = ranks * tokens_per_step * TOP_K * MOE_LAYERS * steps * REPS
        layer_steps = MOE_LAYERS * steps * REPS
        if ep["ranks"] != ranks or ep["runs"] != REPS or len(ep["rank_pairs"]) != ranks:
            fail(f"{row}: ranks {ep['ranks']}, runs {ep['runs']}, rank_pairs {ep['rank_pairs']}")
        if ep["pairs"] != pairs or ep["layer_steps"] != layer_steps:
            fail(f"{row}: pairs {ep['pairs']} (expected {pairs}), layer steps {ep['layer_steps']} "
                 f"(expected {layer_steps})")
        if sum(ep["rank_pairs"]) != ep["pairs"]:
            fail(f"{row}: per-rank pairs {ep['rank_pairs']} do not sum to {ep['pairs']}")
        step_pairs = ep["pairs"] / ep["layer_steps"]  # P of every MoE layer step (all equal here)
        ideal = math.ceil(step_pairs / ranks) / (step_pairs / ranks)
        if abs(ep["imbalance_after"] - ideal) > 1e-12 or ep["imbalance_after"] > ep["imbalance_before"] + 1e-12:
            fail(f"{row}: imbalance after {ep['imbalance_after']} (expected {ideal}), before {ep['imbalance_before']}")
        # floor/ceil per step: a rank's total is within one pair per layer step of the mean
        if max(ep["rank_pairs"]) - min(ep["rank_pairs"]) > ep["layer_steps"]:
            fail(f"{row}: unbalanced rank pairs {ep['rank_pairs']}")
        if not 0 <= ep["moved_pairs"] <= ep["pairs"] or ep["replica_shares"] < 0:
            fail(f"{row}: moved {ep['moved_pairs']}, shares {ep['replica_shares']}")
        if ranks == 1 and (ep["moved_pairs"] != 0 or ep["replica_shares"] != 0 or ep["imbalance_before"] != 1.0):
            fail(f"{row}: one rank moved {ep['moved_pairs']} pairs in {ep['replica_shares']} shares")
        if abs(ep["job_tokens_per_s"] - ranks * r["tokens_per_s"]) > 1e-9 * ep["job_tokens_per_s"]:
            fail(f"{row}: job tokens/s {ep['job_tokens_per_s']} != {ranks} x {r['tokens_per_s']}")
        for phase in ["route", "plan", "dispatch", "experts", "combine", "tail"]:
            r0, mx = ep["seconds_rank0"][phase], ep["seconds_max"][phase]
            if not (0 < r0 <= mx):
                fail(f"{row}: {phase} seconds rank 0 {r0}, max {mx}")
        print(f"{tag} {row}: rank pairs {ep['rank_pairs']}, imbalance {ep['imbalance_before']:.3f} -> "
              f"{ep['imbalance_after']:.3f}, moved {ep['moved_pairs']} in {ep['replica_shares']} shares")


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ["k3-tiny", "kimi-linear-tiny"]:
            path = os.path.join(tmp, f"{name}.csv")
            p = run([MPIEXEC] + FLAGS + ["-np", "2", KIMI] + bench_args(name, 2, ["--json", f"--csv={path}"]))
            j = json.loads(p.stdout)  # one object: rank 1 writes nothing
            check_rows(f"{name} --ep 2", j, 2, failures)
            if p.stderr.count("ep per row") != 1 or p.stderr.count("tokens/s (job)") != 1:
                failures.append(f"{name} --ep 2: expected rank 0's table alone on stderr, got\n{p.stderr}")
            with open(path) as f:
                rows = list(csv.DictReader(f))
            if [(r["test"], int(r["batch"])) for r in rows] != [(r["test"], r["batch"]) for r in j["rows"]]:
                failures.append(f"{name} --ep 2: CSV rows {rows}")
            for c, r in zip(rows, j["rows"]):
                if int(c["ranks"]) != 2 or int(c["pairs"]) != r["ep"]["pairs"] or \
                        c["rank_pairs"] != " ".join(map(str, r["ep"]["rank_pairs"])) or \
                        float(c["imbalance_after"]) != r["ep"]["imbalance_after"]:
                    failures.append(f"{name} --ep 2: CSV row {c} != JSON {r['ep']}")
        # --ep 1 without mpirun (an MPI singleton, or the loopback in a build without MPI)
        p = run([KIMI] + bench_args("kimi-linear-tiny", 1, ["--json"]))
        check_rows("kimi-linear-tiny --ep 1", json.loads(p.stdout), 1, failures)

    def mpi(*args):
        return [MPIEXEC] + FLAGS + ["-np", "2", KIMI, "bench", "--random", "k3-tiny", "-p", "8", "-n", "0", *args]

    errors = [
        (mpi("--ep", "3"), "bench: --ep: expected the number of ranks mpirun started (2; run as `mpirun -np 3 kimi "
                           "bench ... --ep 3`), got 3"),
        ([KIMI, "bench", "--random", "k3-tiny", "--ep", "2"],
         "bench: --ep: expected the number of ranks mpirun started (1;"),
        ([KIMI, "bench", "--random", "k3-tiny", "--ep", "-1"],
         "bench: --ep: expected a number of ranks >= 1 (0 = off), got -1"),
        (mpi("--ep", "2", "--device", "cuda"), "bench: --ep: expected --device cpu (expert parallelism runs on CPU "
                                               "ranks; the GPU transport is not written), got --device cuda"),
        ([KIMI, "bench", "--random", "k3-tiny", "--ep", str(EXPERTS + 1)],
         f"bench: --ep: expected at most as many ranks as the model's routed experts ({EXPERTS}), got {EXPERTS + 1}"),
        (mpi("--ep", "2", "--profile"), "bench: --profile: expected without --ep"),
        (mpi("--ep", "2", "--chip", "h200"), "bench: --chip: expected auto or none with --ep"),
        # ranks that made different models: an error on every rank, then every rank ends (OpenMPI sets
        # OMPI_COMM_WORLD_RANK in each rank's environment)
        ([MPIEXEC] + FLAGS + ["-np", "2", "sh", "-c",
                              'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then m=kimi-linear-tiny; else m=k3-tiny; fi; '
                              f'exec {KIMI} bench --random "$m" -p 8 -n 0 -r 1 --ep 2'],
         "dist::EpModel: the model configuration differs between ranks"),
    ]
    for cmd, msg in errors:
        p = run(cmd, expect_ok=False)
        if p.returncode == 0 or f"kimi: {msg}" not in p.stderr:
            failures.append(f"{' '.join(cmd)}: rc {p.returncode}, expected 'kimi: {msg}' in\n{p.stderr}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
