#!/usr/bin/env python3
"""`kimi generate --ep N` under mpirun equals the single-process run (tests/dist/CMakeLists.txt registers it).

For k3-tiny and kimi-linear-tiny random checkpoints: greedy ids of a 5-prompt varlen batch (stop token included),
plain vs `mpirun -np N ... --ep N` for N in 2, 4: identical ids and finish reasons; the EP report: N ranks, every
MoE layer step balanced (per-rank pair totals within one pair per layer step of each other). Errors: --ep that is not
the world size, a negative --ep, --ep with a GPU device; faults within a bounded time (mpirun fails, naming the
cause): a checkpoint missing on one rank, and ranks that loaded different models.
Usage: cli_generate_ep.py KIMI MPIEXEC [FLAGS...]
"""
import json
import os
import subprocess
import sys
import tempfile

KIMI, MPIEXEC, FLAGS = sys.argv[1], sys.argv[2], sys.argv[3:]
PROMPTS = ["1,2,3", "4,5,6,7,8,9,10", "11", "12,13", "14,15,16,17"]


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if expect_ok and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} returned {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def generate(model, ep=None):
    args = ["generate", model, "--max-tokens", "6", "--stop", "7", "--json", "--no-warmup"]
    for p in PROMPTS:
        args += ["--prompt", p]
    if ep is None:
        return json.loads(run([KIMI] + args).stdout)
    return json.loads(run([MPIEXEC] + FLAGS + ["-np", str(ep), KIMI] + args + ["--ep", str(ep)]).stdout)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ["k3-tiny", "kimi-linear-tiny"]:
            model = os.path.join(tmp, name)
            run([KIMI, "random-model", name, "--out", model, "--seed", "3"])
            ref = generate(model)
            for n in [2, 4]:
                got = generate(model, n)
                for i, (a, b) in enumerate(zip(got["sequences"], ref["sequences"])):
                    if a["ids"] != b["ids"] or a["finish_reason"] != b["finish_reason"]:
                        failures.append(f"{name} --ep {n} prompt {i}: {a['ids']} {a['finish_reason']} != "
                                        f"{b['ids']} {b['finish_reason']}")
                ep = got["ep"]
                pairs = ep["rank_pairs"]
                if ep["ranks"] != n or len(pairs) != n:
                    failures.append(f"{name} --ep {n}: report has {ep['ranks']} ranks, pairs {pairs}")
                if max(pairs) - min(pairs) > ep["layer_steps"] or sum(pairs) != ep["pairs"]:
                    failures.append(f"{name} --ep {n}: unbalanced or lost pairs {pairs} over {ep['layer_steps']} steps")
                if got["decode"]["tokens"] != ref["decode"]["tokens"]:
                    failures.append(f"{name} --ep {n}: decode tokens {got['decode']['tokens']} != "
                                    f"{ref['decode']['tokens']}")
                print(f"{name} --ep {n}: ids equal, rank pairs {pairs}, imbalance "
                      f"{ep['imbalance_before']:.3f} -> {ep['imbalance_after']:.3f}")
        model = os.path.join(tmp, "kimi-linear-tiny")
        errors = [
            ([MPIEXEC] + FLAGS + ["-np", "2", KIMI, "generate", model, "--prompt", "1", "--ep", "3"],
             "generate: --ep: expected the number of ranks mpirun started (2"),
            ([KIMI, "generate", model, "--prompt", "1", "--ep", "-1"],
             "generate: --ep: expected a number of ranks >= 1 (0 = off), got -1"),
            ([KIMI, "generate", model, "--prompt", "1", "--ep", "2", "--device", "cuda"],
             "generate: --ep: expected --device cpu"),
        ]
        # Rank 1 gets another directory (OpenMPI sets OMPI_COMM_WORLD_RANK in each rank's environment).
        def per_rank(other):
            script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then d={other}; else d={os.path.join(tmp, "k3-tiny")}; fi; '
                      f'exec {KIMI} generate "$d" --prompt 1,2 --prompt 3 --ep 2')
            return [MPIEXEC] + FLAGS + ["-np", "2", "sh", "-c", script]
        errors += [
            (per_rank(os.path.join(tmp, "missing")), "model directory " + os.path.join(tmp, "missing")),
            (per_rank(model), "dist::EpModel: the model configuration differs between ranks"),
        ]
        for cmd, msg in errors:
            p = run(cmd, expect_ok=False)
            if p.returncode == 0 or msg not in p.stderr + p.stdout:
                failures.append(f"{' '.join(cmd)}: rc {p.returncode}, expected '{msg}' in\n{p.stderr}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
