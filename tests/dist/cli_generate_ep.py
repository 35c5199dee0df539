#!/usr/bin/env python3
"""`kimi generate --ep N` under mpirun equals the single-process run (tests/dist/CMakeLists.txt registers it).

For k3-tiny and kimi-linear-tiny random checkpoints: greedy ids of a 5-prompt varlen batch (stop token included),
plain vs `mpirun -np N ... --ep N` for N in 2, 4: identical ids and finish reasons; the EP report: N ranks, every
MoE layer step balanced (per-rank pair totals within one pair per layer step of each other). Errors: --ep that is not
the world size, a negative --ep, --ep with a GPU device; faults within a bounded time (mpirun fails, naming the
cause): a checkpoint missing on one rank, and ranks that loaded different models.
Resident experts (--ep-resident held, round-robin and --ep-placement profile with replicas): identical ids; each
rank keeps only its held experts (round-robin: E/N per layer, and the ranks' resident bytes sum to one rank's bytes
with every expert resident) and its Model binds only those from the checkpoint; bad --ep-* flags are errors naming
the flag.
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


def generate(model, ep=None, extra=()):
    args = ["generate", model, "--max-tokens", "6", "--stop", "7", "--json", "--no-warmup"] + list(extra)
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
                config = json.load(open(os.path.join(model, "config.json")))
                experts = config.get("text_config", config)["num_experts"]
                all_bytes = ep["resident_expert_bytes"]
                if ep["loaded_expert_bytes"] != all_bytes:
                    failures.append(f"{name} --ep {n}: loaded {ep['loaded_expert_bytes']} != resident {all_bytes}")
                if ep["resident"] != "all" or ep["resident_experts_per_layer"] != [experts] * n:
                    failures.append(f"{name} --ep {n}: default residency {ep['resident']} "
                                    f"{ep['resident_experts_per_layer']}")
                profile = os.path.join(tmp, f"{name}.profile")
                with open(profile, "w") as f:  # experts 0 and 1 hot
                    f.write(",".join(["6", "6"] + ["1"] * (experts - 2)) + "\n")
                for extra in (["--ep-resident", "held"],
                              ["--ep-resident", "held", "--ep-placement", "profile", "--ep-profile", profile,
                               "--ep-replicas", "2"]):
                    got = generate(model, n, extra)
                    label = f"{name} --ep {n} {' '.join(extra[:4])}"
                    if [a["ids"] for a in got["sequences"]] != [b["ids"] for b in ref["sequences"]]:
                        failures.append(f"{label}: ids differ from the single-process run")
                    ep = got["ep"]
                    held = ep["resident_experts_per_layer"]
                    if ep["resident"] != "held" or sum(ep["rank_pairs"]) != ep["pairs"]:
                        failures.append(f"{label}: residency {ep['resident']}, pairs {ep['rank_pairs']}")
                    if "profile" not in extra and (held != [experts // n] * n or sum(ep["resident_expert_bytes"]) !=
                                                   all_bytes[0]):
                        failures.append(f"{label}: held experts {held}, bytes {ep['resident_expert_bytes']} vs "
                                        f"{all_bytes[0]} for every expert")
                    if ep["loaded_expert_bytes"] != ep["resident_expert_bytes"]:
                        failures.append(f"{label}: the model bound {ep['loaded_expert_bytes']} expert bytes, "
                                        f"EP keeps {ep['resident_expert_bytes']}")
                    if "profile" in extra and sum(held) != experts + 2:
                        failures.append(f"{label}: held experts {held}, expected {experts} + 2 replicas in all")
                    print(f"{label}: ids equal, held experts {held}, rank pairs {ep['rank_pairs']}, "
                          f"bytes {ep['resident_expert_bytes']}")
        model = os.path.join(tmp, "kimi-linear-tiny")
        short = os.path.join(tmp, "short.profile")
        with open(short, "w") as f:
            f.write("1 2 3\n")
        errors = [
            ([MPIEXEC] + FLAGS + ["-np", "2", KIMI, "generate", model, "--prompt", "1", "--ep", "3"],
             "generate: --ep: expected the number of ranks mpirun started (2"),
            ([KIMI, "generate", model, "--prompt", "1", "--ep", "-1"],
             "generate: --ep: expected a number of ranks >= 1 (0 = off), got -1"),
            ([KIMI, "generate", model, "--prompt", "1", "--ep", "2", "--device", "cuda"],
             "generate: --ep: expected --device cpu"),
            ([KIMI, "generate", model, "--prompt", "1", "--ep-resident", "held"],
             "expected --ep N with them"),
            ([KIMI, "generate", model, "--prompt", "1", "--ep", "1", "--ep-resident", "some"],
             "generate: --ep-resident: expected all or held, got 'some'"),
            ([KIMI, "generate", model, "--prompt", "1", "--ep", "1", "--ep-placement", "profile"],
             "generate: --ep-profile: expected a file with --ep-placement profile"),
            ([KIMI, "generate", model, "--prompt", "1", "--ep", "1", "--ep-replicas", "2"],
             "generate: --ep-replicas: expected >= 0, and 0 unless --ep-placement profile, got 2"),
            ([MPIEXEC] + FLAGS + ["-np", "2", KIMI, "generate", model, "--prompt", "1", "--ep", "2",
                                  "--ep-placement", "profile", "--ep-profile", short],
             "generate: --ep-profile: expected 16 numbers (the routed experts)"),
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
