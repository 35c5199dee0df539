#!/usr/bin/env python3
"""The `kimi` command line on bad input: exit code 2 and one `kimi: ...` line naming the command, the flag as
typed, the expected range and the value; on good input, what the flags promise. Runs the built binary:

    python3 tests/cli/cli_errors.py build/release/kimi      (ctest: kimi_cli_errors)

Each check writes into its own temporary directory; one k3-tiny checkpoint (~1.2 MB) is shared.
"""
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

KIMI = None  # the binary, from argv[1]


def run(*args, cwd=None):
    p = subprocess.run([KIMI, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


class Cli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="kimi-cli-")
        cls.model = os.path.join(cls.tmp.name, "k3-tiny")
        rc, out, err = run("random-model", "k3-tiny", "--out", cls.model, "--seed", 1)
        assert rc == 0, err
        # A directory with config.json alone: flags must be refused before the (missing) weights are read.
        cls.config_only = os.path.join(cls.tmp.name, "config-only")
        os.makedirs(cls.config_only)
        with open(os.path.join(cls.model, "config.json")) as src, open(os.path.join(cls.config_only, "config.json"), "w") as dst:
            dst.write(src.read())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def fails(self, args, *fragments):
        rc, out, err = run(*args)
        self.assertEqual(rc, 2, f"kimi {' '.join(map(str, args))}\nstdout: {out}\nstderr: {err}")
        self.assertTrue(err.startswith("kimi: "), err)
        self.assertEqual(err.count("\n"), 1, f"one line expected: {err}")
        for f in fragments:
            self.assertIn(f, err)
        return err

    def gen(self, *flags, model=None):
        return ["generate", model or self.model, "--prompt", "1,2,3", "--threads", "1", *flags]

    # --- generate: item 1, lengths and the cache ---------------------------------------------------------
    def test_max_tokens_range_is_the_context(self):
        for v in ["100000000", "2147483647", "2147483648", "0", "-5", "1048574"]:
            self.fails(self.gen("--max-tokens", v),
                       "generate: --max-tokens: expected a value in [1, 1048573] (the context limit of 1048576 "
                       "tokens less the longest --prompt, 3), got " + v)
        # The longest prompt sets the range.
        self.fails(["generate", self.model, "--prompt", "1", "--prompt", "1,2,3,4,5", "--max-tokens", "1048572"],
                   "--max-tokens: expected a value in [1, 1048571]", "longest --prompt, 5), got 1048572")

    def test_large_max_tokens_cut_by_stop_allocates_little(self):
        rc, out, err = run(*self.gen("--max-tokens", 1))
        self.assertEqual(rc, 0, err)
        first = re.search(r"\[0\] prompt 1 2 3 -> (\d+) \(max tokens\)", out).group(1)
        rc, out, err = run(*self.gen("--max-tokens", 1048573, "--stop", first))
        self.assertEqual(rc, 0, err)
        self.assertIn(f"[0] prompt 1 2 3 -> {first} (stop token)", out)
        mib = float(re.search(r"cache\s+([\d.]+) MiB", out).group(1))
        self.assertLess(mib, 1.0)  # 3 + 256 tokens of room, not 1048576 (~960 MiB for k3-tiny)

    # --- generate: item 4, values accepted silently before ------------------------------------------------
    def test_seed_range(self):
        for v in ["-1", "18446744073709551616", "99999999999999999999999", "1.5", "0x10", ""]:
            self.fails(self.gen("--seed", v),
                       f"generate: --seed: expected an integer in [0, 2^64 - 1 = 18446744073709551615], got '{v}'")
        rc, _, err = run(*self.gen("--seed", "18446744073709551615", "--temperature", "1", "--max-tokens", 2))
        self.assertEqual(rc, 0, err)

    def test_stop_and_prompt_ids_in_the_vocabulary(self):
        for v in ["-1", "512", "100000"]:
            self.fails(self.gen("--stop", v),
                       f"generate: --stop: expected token ids in [0, 512) (the vocabulary of {self.model}), got {v}")
        self.fails(["generate", self.model, "--prompt", "1,2", "--prompt", "3,512,4"],
                   f"generate: --prompt #2: expected token ids in [0, 512) (the vocabulary of {self.model}), "
                   "got 512 at position 2")
        self.fails(["generate", self.model, "--prompt", "1,-1"],
                   "generate: --prompt #1: expected comma-separated non-negative token ids, got '1,-1'")

    def test_threads_range(self):
        # The bound is this machine's CPU count (std::thread::hardware_concurrency), as --help says.
        n = int(re.search(r"CPU threads, in \[0, (\d+)\]", run("generate", "--help")[1]).group(1))
        self.assertGreaterEqual(n, 1)
        for v in ["-1", "1000", str(n + 1)]:
            self.fails(["generate", self.model, "--prompt", "1", "--threads", v],
                       f"generate: --threads: expected a value in [0, {n}] (0 = OpenMP's default; at most the {n} "
                       f"CPUs of this machine), got {v}")
        rc, _, err = run("generate", self.model, "--prompt", "1", "--threads", n, "--max-tokens", 1)
        self.assertEqual(rc, 0, err)

    def test_dtype(self):
        for v in ["fp8", "f16", "BF16", ""]:
            self.fails(self.gen("--dtype", v, model=self.config_only),  # refused before the weights are read
                       f"generate: --dtype: expected auto (bf16 on a GPU, f32 on the CPU), f32 or bf16, got '{v}'")
        for v, shown in [("auto", "f32"), ("f32", "f32"), ("bf16", "bf16")]:
            rc, out, err = run(*self.gen("--dtype", v, "--max-tokens", 2))
            self.assertEqual(rc, 0, err)
            self.assertIn(f"activations {shown} (residual stream", out)

    # --- generate: item 6, every flag before loading, named as typed -------------------------------------
    def test_flags_checked_before_loading(self):
        m = self.config_only  # no safetensors: loading would fail with a checkpoint error
        self.fails(self.gen("--top-p", "2", model=m), "generate: --top-p: expected a value in (0, 1], got 2")
        self.fails(self.gen("--top-p", "0", model=m), "generate: --top-p: expected a value in (0, 1], got 0")
        self.fails(self.gen("--temperature", "-1", model=m),
                   "generate: --temperature: expected a finite value >= 0 (0 = greedy), got -1")
        self.fails(self.gen("--temperature", "inf", model=m), "generate: --temperature", "got inf")
        self.fails(self.gen("--top-k", "-1", model=m), "generate: --top-k: expected >= 0 (0 = all tokens), got -1")
        self.fails(self.gen("--max-tokens", "0", model=m), "generate: --max-tokens: expected a value in [1, 1048573]")
        self.fails(self.gen("--stop", "512", model=m), "generate: --stop")
        self.fails(self.gen("--device", "gpu", model=m),
                   "generate: --device: expected cpu, cuda or cuda:<index>, got 'gpu'")
        _, _, err = run(*self.gen("--top-p", "2", "--top-k", "-1", model=m))
        for field in ["top_p", "top_k", "sampling"]:  # the library's field names never reach the user
            self.assertNotIn(field, err)

    # --- generate: item 9, warm-up ----------------------------------------------------------------------
    def test_warmup_by_default_and_said(self):
        rc, out, err = run(*self.gen("--max-tokens", 2))
        self.assertEqual(rc, 0, err)
        self.assertIn("timing     after an untimed warm-up of the batch (prefill + one decode step)\n", out)
        self.assertIn("graphs     decode off: the model runs on cpu (CUDA graphs are for models on one GPU)\n", out)
        rc, out2, err = run(*self.gen("--max-tokens", 2, "--no-warmup"))
        self.assertEqual(rc, 0, err)
        self.assertIn("timing     cold start included (--no-warmup)\n", out2)
        tokens = lambda o: re.search(r"\[0\] prompt .*", o).group(0)
        self.assertEqual(tokens(out), tokens(out2))  # the warm-up changes nothing but the timing

    def test_generate_prints_peak_memory(self):
        rc, out, err = run(*self.gen("--max-tokens", 2))
        self.assertEqual(rc, 0, err)
        m = re.search(r"\nmemory     peak ([\d.]+) MiB on cpu \(tensors ([\d.]+) MiB, the mapped checkpoint not counted\)\n", out)
        self.assertIsNotNone(m, out)
        self.assertGreater(float(m.group(1)), 0)
        self.assertEqual(m.group(1), m.group(2))  # no CUDA memory pool on the host

    # --- random-model: items 4 and 5 --------------------------------------------------------------------
    def test_random_model_shards_cap(self):
        out = os.path.join(self.tmp.name, "shards")
        for v in ["100000", "1003", "0"]:
            self.fails(["random-model", "k3-tiny", "--out", out, "--shards", v],
                       "random-model: --shards: expected a value in [1, 1002] (k3-tiny has 1002 tensors; every "
                       f"shard holds at least one), got {v}")
        self.assertFalse(os.path.exists(out))  # refused before anything is written

    def test_random_model_seed_range(self):
        out = os.path.join(self.tmp.name, "seed")
        self.fails(["random-model", "k3-tiny", "--out", out, "--seed", "-1"],
                   "random-model: --seed: expected an integer in [0, 2^64 - 1 = 18446744073709551615], got '-1'")
        self.assertFalse(os.path.exists(out))

    def test_random_model_out_errors(self):
        f = os.path.join(self.tmp.name, "a-file")
        open(f, "w").close()
        self.fails(["random-model", "k3-tiny", "--out", f], f"random-model: --out '{f}': exists and is not a directory")
        self.fails(["random-model", "k3-tiny", "--out", ""],
                   "random-model: --out '': expected a directory path, got an empty one")
        under = os.path.join(f, "sub", "dir")
        self.fails(["random-model", "k3-tiny", "--out", under],
                   f"random-model: --out '{under}': cannot be created: '{f}' is not a directory")
        if os.geteuid() != 0:  # root writes anywhere: the permission check is only observable as a user
            ro = os.path.join(self.tmp.name, "read-only")
            os.makedirs(ro)
            os.chmod(ro, 0o500)
            self.fails(["random-model", "k3-tiny", "--out", ro],
                       f"random-model: --out '{ro}': cannot write into it: Permission denied")
            self.fails(["random-model", "k3-tiny", "--out", os.path.join(ro, "x")],
                       f"cannot be created in '{ro}': Permission denied")

    def test_random_model_existing_checkpoint_needs_force(self):
        out = os.path.join(self.tmp.name, "again")
        self.assertEqual(run("random-model", "kimi-linear-tiny", "--out", out)[0], 0)
        before = os.path.getmtime(os.path.join(out, "model.safetensors"))
        self.fails(["random-model", "kimi-linear-tiny", "--out", out],
                   f"random-model: --out '{out}': already holds a checkpoint (", "); pass --force to replace it")
        self.assertEqual(os.path.getmtime(os.path.join(out, "model.safetensors")), before)
        rc, _, err = run("random-model", "kimi-linear-tiny", "--out", out, "--force", "--shards", 3)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(os.listdir(out)), ["config.json", "model-00001-of-00003.safetensors",
                                                   "model-00002-of-00003.safetensors",
                                                   "model-00003-of-00003.safetensors", "model.safetensors.index.json",
                                                   "tiktoken.model", "tokenizer_config.json"])
        # Tokenizer files alone count as a checkpoint too (--force replaces them).
        tok_only = os.path.join(self.tmp.name, "tokenizer-only")
        os.makedirs(tok_only)
        open(os.path.join(tok_only, "tiktoken.model"), "w").close()
        self.fails(["random-model", "kimi-linear-tiny", "--out", tok_only],
                   f"random-model: --out '{tok_only}': already holds a checkpoint (tiktoken.model); pass --force "
                   "to replace it")
        # A vocabulary without room for the 256 bytes and 256 specials: no tokenizer, and none left from before.
        with open(os.path.join(out, "config.json")) as f:
            cfg = json.load(f)
        cfg["vocab_size"] = 300
        small = os.path.join(self.tmp.name, "vocab-300.json")
        with open(small, "w") as f:
            json.dump(cfg, f)
        rc, so, err = run("random-model", small, "--out", out, "--force")
        self.assertEqual(rc, 0, err)
        self.assertIn("tokenizer  none: vocab_size 300 leaves no room for the 256 byte tokens and 256 special tokens "
                      "(needs >= 512)", so)
        self.assertFalse(os.path.exists(os.path.join(out, "tiktoken.model")))
        self.assertFalse(os.path.exists(os.path.join(out, "tokenizer_config.json")))
        # An existing directory without a checkpoint is fine.
        empty = os.path.join(self.tmp.name, "empty")
        os.makedirs(empty)
        self.assertEqual(run("random-model", "kimi-linear-tiny", "--out", empty)[0], 0)

    def test_random_model_config_names(self):
        self.fails(["random-model", "k3-huge", "--out", os.path.join(self.tmp.name, "x")],
                   "random-model: config: expected k3-tiny, kimi-linear-tiny, k3-slice or a config.json path, "
                   "got 'k3-huge' (no such file)")

    # --- plan: the cost model of the forward (kimi/model/cost.h) ---------------------------------------------
    def test_plan_flags(self):
        cfg = "kimi-linear-tiny"
        self.fails(["plan", cfg, "--chip", "a100"],
                   "plan: --chip: expected h200, h100 or b200 (or --bandwidth and --tflops for another chip), got 'a100'")
        for v in ["0", "-1", "abc", "1048577", "1.5", ""]:
            self.fails(["plan", cfg, "--batch", v], f"plan: --batch: expected an integer in [1, 1048576], got '{v}'")
        self.fails(["plan", cfg, "--prompt", "0"],
                   "plan: --prompt: expected an integer in [1, 1048576] (the context limit), got '0'")
        self.fails(["plan", cfg, "--context", "-1"],
                   "plan: --context: expected an integer in [0, 1048575] (the context limit less the new token), got '-1'")
        for v in ["0", "-3", "nan", "inf", "fast"]:
            self.fails(["plan", cfg, "--target-tps", v],
                       f"plan: --target-tps: expected a finite number > 0 (decode tokens/s per sequence), got '{v}'")
        self.fails(["plan", cfg, "--bandwidth", "3000"],
                   "plan: --bandwidth: expected --bandwidth and --tflops together (a chip given on the command line "
                   "needs both), got --bandwidth 3000 alone")
        self.fails(["plan", cfg, "--tflops", "900"], "plan: --tflops: expected --bandwidth and --tflops together",
                   "got --tflops 900 alone")
        self.fails(["plan", cfg, "--bandwidth", "3000", "--tflops", "-1"],
                   "plan: --tflops: expected a finite number > 0 (dense bf16 TFLOP/s), got '-1'")
        self.fails(["plan", cfg, "--bandwidth", "0", "--tflops", "900"],
                   "plan: --bandwidth: expected a finite number > 0 (GB/s), got '0'")
        self.fails(["plan", cfg, "--dtype", "fp8"], "plan: --dtype: expected bf16, f16 or f32, got 'fp8'")
        self.fails(["plan", cfg, "--experts", "fp4"], "plan: --experts: expected auto, bf16 or mxfp4, got 'fp4'")
        self.fails(["plan", "k3-huge"],
                   "plan: config: expected k3-tiny, kimi-linear-tiny, k3-slice, a checkpoint directory or a config.json "
                   "path, got 'k3-huge' (no such file)")
        self.fails(["plan", self.tmp.name],  # a directory without config.json
                   f"plan: config: {self.tmp.name}/config.json: cannot open: no such file")
        bad = os.path.join(self.tmp.name, "bad-config.json")
        with open(bad, "w") as f:
            f.write('{"vocab_size": 0}')
        self.fails(["plan", bad], f"plan: config: {bad}: field 'vocab_size': expected an integer >= 1, got 0")
        self.fails(["plan", cfg, "--json", self.tmp.name], f"plan: --json '{self.tmp.name}': is a directory")
        missing = os.path.join(self.tmp.name, "no", "plan.json")
        self.fails(["plan", cfg, "--csv", missing],
                   f"plan: --csv '{missing}': cannot be created: '{os.path.dirname(missing)}' does not exist")
        self.fails(["plan", cfg, "--json", ""], "plan: --json '': expected a file path or '-' (stdout), got an empty one")
        self.fails(["plan", cfg, "--json", "-", "--csv", "-"],
                   "plan: --csv: expected a file path when --json is '-' (one of them may take stdout), got '-'")
        same = os.path.join(self.tmp.name, "same")
        self.fails(["plan", cfg, "--json", same, "--csv", same], f"plan: --csv: expected a path other than --json's, got '{same}'")
        self.assertFalse(os.path.exists(same))  # refused before anything is written

    def test_plan_ep_flags(self):
        cfg = "k3-tiny"  # 16 routed experts
        self.fails(["plan", cfg, "--ep", "0"],
                   "plan: --ep: expected an integer in [1, 16] (GPUs, at most the 16 routed experts), got '0'")
        self.fails(["plan", cfg, "--ep", "4,17"], "plan: --ep: expected an integer in [1, 16]", "got '17'")
        self.fails(["plan", cfg, "--ep", "4,"], "plan: --ep: expected an integer in [1, 16]", "got ''")
        self.fails(["plan", "kimi-linear-tiny", "--ep", "0"], "plan: --ep: expected an integer in [1, ")
        self.fails(["plan", cfg, "--ep-batch", "8"],
                   "plan: --ep-batch: expected --ep N[,N...] with it (it describes an expert-parallel plan), got "
                   "--ep-batch without --ep")
        self.fails(["plan", cfg, "--ep", "4", "--ep-batch", "0"],
                   "plan: --ep-batch: expected an integer in [1, 1048576] (decode sequences per GPU), got '0'")
        self.fails(["plan", cfg, "--ep", "4", "--ib-gbs", "0"],
                   "plan: --ib-gbs: expected a finite number > 0 (GB/s per GPU per direction), got '0'")
        self.fails(["plan", cfg, "--ep", "4", "--nvlink-gbs", "x"], "plan: --nvlink-gbs: expected a finite number > 0")
        self.fails(["plan", cfg, "--ep", "4", "--gpus-per-node", "0"],
                   "plan: --gpus-per-node: expected an integer in [1, 1024], got '0'")
        self.fails(["plan", cfg, "--ep", "4", "--ep-redundant", "-1"],
                   "plan: --ep-redundant: expected an integer in [0, ")
        self.fails(["plan", cfg, "--ep", "4", "--per-op"], "plan: --per-op: expected no --per-op with --ep")
        self.fails(["plan", cfg, "--ep", "4", "--target-tps", "5"],
                   "plan: --target-tps: expected no --target-tps with --ep")

    def test_plan_ep_json_and_table(self):
        out = os.path.join(self.tmp.name, "plan-ep.json")
        rc, stdout, err = run("plan", "k3-tiny", "--ep", "1,4,16", "--ep-batch", 3, "--context", 10, "--prompt", 8,
                              "--gpus-per-node", 2, "--ib-gbs", 10, "--nvlink-gbs", 100, "--ep-published", 1000,
                              "--json", out)
        self.assertEqual(rc, 0, err)
        self.assertRegex(stdout, r"\nGPUs \(EP ranks\) +1 +4 +16\n")
        self.assertIn("\npublished  1000 decode tok/s per GPU; predicted here:\n           EP 1: ", stdout)
        self.assertRegex(stdout,
                         r"\n           EP 16: \d+ without overlap \([\d.]+x\), \d+ with full overlap \([\d.]+x\)\n")
        with open(out) as f:
            j = json.load(f)
        self.assertEqual([e["ranks"] for e in j["ep"]], [1, 4, 16])
        self.assertEqual(j["links"], {"nvlink_bytes_per_s": 100e9, "ib_bytes_per_s": 10e9, "gpus_per_node": 2})
        # k3-tiny: latent rows of routed_expert_hidden_size bf16, top-k picks; 4 ranks in nodes of 2: 1 NVLink peer and
        # 2 IB peers of the 3 others.
        rc, cfg_out, err = run("plan", "k3-tiny", "--json", "-")
        one = json.loads(cfg_out)
        k = one["config"]["num_experts_per_token"]
        e1, e4 = j["ep"][0], j["ep"][1]
        self.assertEqual(e1["decode"]["per_moe_layer_bytes"]["dispatch_ib"], 0)
        d4 = e4["decode"]["per_moe_layer_bytes"]
        self.assertGreater(d4["dispatch_nvlink"], 0)
        self.assertEqual(d4["dispatch_ib"], 2 * d4["dispatch_nvlink"])
        self.assertEqual(d4["dispatch_ib"], d4["combine_ib"])
        self.assertEqual(d4["allgather_nvlink"], 16 * 8)
        self.assertEqual(e4["decode"]["pairs_per_rank"], 3 * k)
        self.assertEqual(e4["expert_slots_per_rank"], 4)
        self.assertEqual(j["ep"][2]["expert_slots_per_rank"], 1)
        for e in j["ep"]:
            for step in ("decode", "prefill"):
                s = e[step]
                comm = s["allgather_seconds"] + s["dispatch_seconds"] + s["combine_seconds"]
                self.assertAlmostEqual(s["step_seconds"], s["compute_seconds"] + comm,
                                       delta=1e-12 + 1e-9 * s["step_seconds"])
                self.assertLessEqual(s["step_overlap_seconds"], s["step_seconds"])
                self.assertEqual(len(s["layers"]), 9)  # k3-tiny: 9 decoder layers, layer 0 dense
                self.assertEqual(s["layers"][0]["comm_seconds"], 0)
                hidden = sum(l["overlap_seconds"] - l["compute_seconds"] for l in s["layers"])
                self.assertAlmostEqual(s["step_overlap_seconds"], s["compute_seconds"] + hidden,
                                       delta=1e-12 + 1e-9 * s["step_seconds"])
        # One rank: the one-chip decode step of the same workload.
        rc, single, err = run("plan", "k3-tiny", "--batch", 3, "--context", 10, "--prompt", 8, "--json", "-")
        dec = json.loads(single)["steps"]["decode"]
        self.assertAlmostEqual(e1["decode"]["step_seconds"], dec["predictions"][0]["seconds"], delta=1e-15)
        self.assertEqual(e1["decode"]["bytes"], dec["bytes"])
        rc, csv_out, err = run("plan", "k3-tiny", "--ep", "2", "--csv", "-")
        self.assertEqual(rc, 0, err)
        rows = list(csv.DictReader(csv_out.splitlines()))
        self.assertEqual([(r["ranks"], r["step"]) for r in rows], [("2", "prefill"), ("2", "decode")])

    def test_plan_json_and_csv(self):
        out = os.path.join(self.tmp.name, "plan.json")
        csv_path = os.path.join(self.tmp.name, "plan.csv")
        rc, stdout, err = run("plan", self.model, "--batch", 2, "--prompt", 16, "--context", 100, "--chip", "h200",
                              "--chip", "b200", "--target-tps", 50, "--json", out, "--csv", csv_path)
        self.assertEqual(rc, 0, err)
        self.assertIn("\nh200 ", stdout)  # the table is printed beside the files
        with open(out) as f:
            j = json.load(f)
        self.assertEqual([c["name"] for c in j["chips"]], ["h200", "b200"])
        self.assertTrue(j["config"]["mxfp4_experts"])  # k3-tiny is K3's layout: MXFP4 experts by default
        pre, dec = j["steps"]["prefill"], j["steps"]["decode"]
        self.assertEqual(pre["workload"], {"batch": 2, "new_tokens_per_seq": 16, "context": 0, "activations": "bf16"})
        self.assertEqual(dec["workload"], {"batch": 2, "new_tokens_per_seq": 1, "context": 100, "activations": "bf16"})
        self.assertEqual(pre["tokens"], 32)
        for step in (pre, dec):
            for key in ("bytes_weights", "bytes_activations", "bytes_cache", "flops"):
                self.assertAlmostEqual(sum(o[key] for o in step["ops"]), step[key], delta=1e-9 * step[key])
            for p in step["predictions"]:
                t = sum(o["seconds"][p["chip"]] for o in step["ops"])
                self.assertAlmostEqual(p["seconds"], t, delta=1e-12 + 1e-9 * t)
                self.assertAlmostEqual(p["tokens_per_s"], step["tokens"] / p["seconds"], delta=1e-6 * p["tokens_per_s"])
        # 16 experts top-4, 2 decode tokens: 16 * (1 - (3/4)^2) distinct experts per MoE layer.
        self.assertAlmostEqual(dec["touched_experts"], 16 * (1 - 0.75 ** 2), places=9)
        self.assertEqual(j["target"]["bandwidth_bytes_per_s"], dec["bytes"] * 50)
        self.assertEqual(j["target"]["decode_tokens_per_s_total"], 100)
        with open(csv_path) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), len(pre["ops"]) + len(dec["ops"]))
        self.assertEqual(list(rows[0].keys())[-2:], ["h200_seconds", "b200_seconds"])
        self.assertEqual((rows[0]["step"], rows[0]["layer_kind"], rows[0]["op"]), ("prefill", "embed", "embed_tokens"))
        # --per-op: one row per op of both steps, timed on the first chip.
        rc, stdout, err = run("plan", self.model, "--per-op", "--chip", "b200", "--chip", "h100")
        self.assertEqual(rc, 0, err)
        self.assertIn("\nper op on b200:\n", stdout)
        self.assertRegex(stdout, r"\ndecode +0 kda +q_proj +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +memory\n")
        self.assertRegex(stdout, r"\nprefill +-1 head +lm_head ")
        # '-' writes the JSON to stdout alone.
        rc, stdout, err = run("plan", self.model, "--json", "-")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(stdout)["steps"]["decode"]["workload"]["context"], 2048)  # --context = --prompt

    def test_plan_kimi_linear_slice_decode_weights(self):
        # Issue 23: ~1.56 GB of active bf16 weights per decode step at batch 1 for the real-width slice.
        slice_cfg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs",
                                 "kimi-linear-48b-slice.json")
        rc, stdout, err = run("plan", slice_cfg, "--json", "-")
        self.assertEqual(rc, 0, err)
        dec = json.loads(stdout)["steps"]["decode"]
        self.assertAlmostEqual(dec["bytes_weights"] / 1e9, 1.564, places=3)
        self.assertEqual(dec["touched_experts"], 8)

    # --- bench ------------------------------------------------------------------------------------------
    def bench(self, *flags, model=None):
        return ["bench", model or self.model, "--threads", "1", *flags]

    def test_bench_random_json_rows(self):
        rc, out, err = run("bench", "--random", "k3-tiny", "--device", "cpu", "-p", 16, "-n", 4, "-b", "1,2", "--json",
                           "--threads", 1, "-r", 2)
        self.assertEqual(rc, 0, err)
        j = json.loads(out)  # stdout holds the JSON alone: the table went to stderr
        self.assertEqual((j["model"], j["random"], j["device"], j["repetitions"], j["warmup"]), ("k3-tiny", True, "cpu", 2, 1))
        self.assertEqual((j["layers"], j["hidden"], j["weight_bytes"], j["device_weight_bytes"]), (9, 256, 10996160, 0))
        rows = j["rows"]
        self.assertEqual([(r["test"], r["kind"], r["n"], r["batch"], r["tokens"]) for r in rows],
                         [("pp16", "pp", 16, 1, 16), ("pp16", "pp", 16, 2, 32), ("tg4", "tg", 4, 1, 4), ("tg4", "tg", 4, 2, 8)])
        for r in rows:
            self.assertEqual(len(r["seconds"]), 2)
            for key in ["tokens_per_s", "ms_per_step", "ms_per_step_min", "ms_per_step_max", "peak_bytes",
                        "tensor_peak_bytes"]:
                self.assertGreater(r[key], 0, f"{r['test']} batch {r['batch']}: {key}")
            self.assertLessEqual(r["ms_per_step_min"], r["ms_per_step"])
            self.assertLessEqual(r["ms_per_step"], r["ms_per_step_max"])
            self.assertGreater(r["peak_bytes"], 10 << 20)  # the made weights (10.5 MiB) are host Tensors
            steps = r["n"] if r["kind"] == "tg" else 1
            median = sorted(r["seconds"])[0] / 2 + sorted(r["seconds"])[1] / 2
            self.assertAlmostEqual(r["tokens_per_s"], r["tokens"] / median, delta=1e-6 * r["tokens_per_s"])
            self.assertAlmostEqual(r["ms_per_step"], 1e3 * median / steps, delta=1e-6 * r["ms_per_step"])
        self.assertIn("| k3-tiny (random)", err)
        self.assertIn("bench: [4/4] tg4 batch 2", err)
        off = "off: the model runs on cpu (CUDA graphs are for models on one GPU)"
        self.assertEqual(j["decode_graphs"], off)
        self.assertIn("graphs     decode " + off + "\n", err)

    def test_bench_predicted_columns_are_kimi_plans(self):
        # --chip: each row's predicted / floor ms are the cost model's step (kimi plan) for the row's workload
        rc, out, err = run("bench", "--random", "k3-tiny", "--device", "cpu", "-p", 16, "-n", 4, "-b", 2, "--json",
                           "--threads", 1, "-r", 1, "--chip", "h200", "--context", 6)
        self.assertEqual(rc, 0, err)
        rows = {r["kind"]: r for r in json.loads(out)["rows"]}
        self.assertIn("predicted ms | floor ms", err)
        for kind, args in [("pp", ["--prompt", 16]), ("tg", ["--prompt", 1, "--context", 8])]:  # tg: middle context 6 + 2
            rc, plan_out, err = run("plan", "k3-tiny", "--batch", 2, "--dtype", "f32", "--json", "-", *args)
            self.assertEqual(rc, 0, err)
            step = json.loads(plan_out)["steps"]["prefill" if kind == "pp" else "decode"]["predictions"][0]
            self.assertAlmostEqual(rows[kind]["predicted_ms"], 1e3 * step["seconds"], delta=1e-9)
            floor = step["compute_seconds"] if kind == "pp" else step["memory_seconds"]
            self.assertAlmostEqual(rows[kind]["floor_ms"], 1e3 * floor, delta=1e-9)
        self.fails(["bench", "--random", "k3-tiny", "--chip", "a100"],
                   "bench: --chip: expected auto, none or a named chip (h200, h100, b200), got 'a100'")

    def test_bench_profile_per_op(self):
        # --profile: one more run per row timed per operator, under the cost model's layer kinds, whose predicted
        # times add up to the row's predicted step
        rc, out, err = run("bench", "--random", "k3-tiny", "--device", "cpu", "-p", 16, "-n", 4, "-b", 2, "--json",
                           "--threads", 1, "-r", 1, "--chip", "h200", "--profile")
        self.assertEqual(rc, 0, err)
        rows = json.loads(out)["rows"]
        self.assertEqual([r["test"] for r in rows], ["pp16", "tg4"])
        kinds = {"embed", "kda", "mla", "moe", "dense_ffn", "attn_res", "head"}
        for r in rows:
            p = r["profile"]
            scopes = {o["scope"] for o in p["ops"]}
            self.assertTrue(scopes <= kinds, scopes)
            self.assertTrue({"embed", "kda", "mla", "moe", "attn_res", "head"} <= scopes, scopes)
            calls = {(o["scope"], o["op"]): o["calls_per_step"] for o in p["ops"]}
            self.assertEqual(calls[("head", "linear")], 1.0)
            self.assertEqual(calls[("embed", "gather_rows")], 1.0)
            ops_ms = sum(o["ms_per_step"] for o in p["ops"])
            self.assertGreater(ops_ms, 0)
            self.assertGreaterEqual(p["other_ms_per_step"], 0)
            self.assertAlmostEqual(p["wall_ms_per_step"], ops_ms + p["other_ms_per_step"], delta=1e-6 * p["wall_ms_per_step"])
            self.assertAlmostEqual(sum(p["predicted_ms_per_step"].values()), r["predicted_ms"], delta=1e-9)
            self.assertIn(f"profile {r['test']} batch 2:", err)

    def test_bench_checkpoint_csv_and_context(self):
        path = os.path.join(self.tmp.name, "bench.csv")
        rc, out, err = run(*self.bench("-p", "8", "-n", "2", "-b", "1", "--context", "5", "-r", "1", "--warmup", "0",
                                       f"--csv={path}"))
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"\|\s+pp8 \|\s+1 \|")  # the table on stdout
        with open(path) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([(r["test"], r["batch"], r["context"]) for r in rows], [("pp8", "1", "0"), ("tg2@5", "1", "5")])
        for r in rows:
            self.assertGreater(float(r["tokens_per_s"]), 0)
            self.assertEqual(r["predicted_ms"], "")  # the cost model's columns, empty until one fills them

    def test_bench_flags_checked_before_loading(self):
        m = self.config_only  # no safetensors: loading would fail with a checkpoint error
        for v in ["16,x", "-1", "1,,2", "1048577", ""]:
            self.fails(self.bench("-p", v, model=m),
                       "bench: -p/--prompt: expected comma-separated integers in [1, 1048576] (0 alone: no prefill "
                       f"rows), got '{v}'")
        self.fails(self.bench("-n", "0,4", model=m), "bench: -n/--gen: expected comma-separated integers in [1, 1048576] "
                   "(0 alone: no decode rows), got '0,4'")
        self.fails(self.bench("-b", "0", model=m), "bench: -b/--batch: expected comma-separated integers in [1, 65536], "
                   "got '0'")
        self.fails(self.bench("-p", "0", "-n", "0", model=m),
                   "bench: -p/--prompt, -n/--gen: expected at least one row, got -p 0 and -n 0")
        self.fails(self.bench("-b", "1,4096", "-p", "8192", model=m),
                   "bench: -b/--batch x -p/--prompt: expected at most 16777216 tokens per forward (2^24), got "
                   "4096 x 8192 = 33554432")
        self.fails(self.bench("-b", "65536", "-p", "0", "-n", "1", "--context", "1000", model=m),
                   "bench: -b/--batch x --context: expected at most 16777216 tokens per forward (2^24), got "
                   "65536 x 1000 = 65536000")
        self.fails(self.bench("-r", "0", model=m), "bench: -r/--repetitions: expected a value in [1, 1000], got 0")
        self.fails(self.bench("--warmup", "-1", model=m), "bench: --warmup: expected a value in [0, 100], got -1")
        self.fails(self.bench("-n", "128", "--context", "1048449", model=m),
                   "bench: --context: expected a value in [0, 1048448] (the context limit of 1048576 tokens less the "
                   "longest -n/--gen, 128), got 1048449")
        self.fails(self.bench("--device", "gpu", model=m), "bench: --device: expected cpu, cuda or cuda:<index>, got 'gpu'")
        self.fails(self.bench("--seed", "-1", model=m),
                   "bench: --seed: expected an integer in [0, 2^64 - 1 = 18446744073709551615], got '-1'")
        self.fails(self.bench("--experts", "mxfp4", model=m),
                   "bench: --experts: expected only with --random (a checkpoint's experts run as stored), got 'mxfp4'")
        self.fails(self.bench("--json", "--csv", model=m),
                   "bench: --csv: expected a file path when --json writes to stdout, got '-'")
        missing = os.path.join(self.tmp.name, "no", "such", "dir", "out.json")
        self.fails(self.bench(f"--json={missing}", model=m),
                   f"bench: --json '{missing}': the directory '{os.path.dirname(missing)}' does not exist")
        self.fails(self.bench(f"--csv={self.tmp.name}", model=m),
                   f"bench: --csv '{self.tmp.name}': expected a file path, got a directory")
        self.assertFalse(os.path.exists(os.path.dirname(missing)))

    def test_bench_random_model_names(self):
        self.fails(["bench", "--random", "k3-huge"],
                   "bench: model: expected with --random k3-tiny, kimi-linear-tiny, k3-slice or a config.json path, "
                   "got 'k3-huge' (no such file)")
        self.fails(["bench", "--random", "k3-tiny", "--experts", "fp8"],
                   "bench: --experts: expected auto, mxfp4 or bf16, got 'fp8'")
        self.fails(["bench", "--random", self.tmp.name], f"got '{self.tmp.name}' (not a file)")
        # a config.json path works like a name
        rc, out, err = run("bench", "--random", os.path.join(self.model, "config.json"), "-p", 4, "-n", 0, "-r", 1,
                           "--threads", 1)
        self.assertEqual(rc, 0, err)
        self.assertIn("(random weights, seed 0, MXFP4 experts)", out)

    # --- --help: item 9 ---------------------------------------------------------------------------------
    def test_help_shows_defaults_and_named_configs(self):
        rc, out, _ = run("generate", "--help")
        self.assertEqual(rc, 0)
        for default in ["--max-tokens INT=16", "--temperature FLOAT=0", "--top-k INT=0", "--top-p FLOAT=1",
                        "--seed TEXT=0", "--threads INT=0", "--device TEXT=cpu", "--no-warmup"]:
            self.assertIn(default, out)
        rc, out, _ = run("random-model", "--help")
        self.assertEqual(rc, 0)
        for text in ["--seed TEXT=0", "--shards INT=1", "--experts TEXT=auto", "--force"]:
            self.assertIn(text, out)
        for name in ["k3-tiny", "kimi-linear-tiny", "k3-slice"]:
            self.assertRegex(out, rf"\n  {name} +\S")  # a line of the named-config list describes it
        rc, out, _ = run("plan", "--help")
        self.assertEqual(rc, 0)
        for text in ["--batch TEXT=1", "--prompt TEXT=2048", "--dtype TEXT=bf16", "--experts TEXT=auto",
                     "Decode tokens/s PER SEQUENCE", "configs/k3.json"]:
            self.assertIn(text, out)

        rc, out, _ = run("bench", "--help")
        self.assertEqual(rc, 0)
        for text in ["--prompt TEXT=512", "--gen TEXT=128", "--batch TEXT=1", "--repetitions INT=5", "--warmup INT=1",
                     "--context INT=0", "--device TEXT=cpu", "--random", "--json", "--csv", "k3-slice"]:
            self.assertIn(text, out)

    # --- generate --text: prompts through the checkpoint's tokenizer ---------------------------------------
    def test_generate_text_prompts(self):
        # A 4096-token vocabulary (BPE merges) on kimi-linear-tiny's layout: the text is encoded as `tokenize` does.
        model = os.path.join(self.tmp.name, "kl-4096")
        with open(os.path.join(self.tmp.name, "kl-4096.json"), "w") as f:
            rc, out, err = run("random-model", "kimi-linear-tiny", "--out", model)
            self.assertEqual(rc, 0, err)
            with open(os.path.join(model, "config.json")) as src:
                cfg = json.load(src)
            cfg["vocab_size"] = 4096
            json.dump(cfg, f)
        rc, out, err = run("random-model", os.path.join(self.tmp.name, "kl-4096.json"), "--out", model, "--force")
        self.assertEqual(rc, 0, err)
        text = "Once upon a time, 机器学习 <|im_end|>"
        rc, out, err = run("tokenize", model, "--text", text)
        self.assertEqual(rc, 0, err)
        prompt = out.strip()
        rc, out, err = run("generate", model, "--text", text, "--max-tokens", 6, "--threads", 1)
        self.assertEqual(rc, 0, err)
        m = re.search(r"^\[0\] prompt (.*) -> (.*) \(max tokens\)$", out, re.M)
        self.assertEqual(m.group(1), prompt.replace(",", " "))  # user text: <|im_end|> stays text
        ids = m.group(2).replace(" ", ",")
        rc, decoded, err = run("tokenize", model, "--ids", ids, "--json")
        self.assertIn(f"[0] text   {json.dumps(text, ensure_ascii=False)} -> "
                      f"{json.dumps(json.loads(decoded)['text'], ensure_ascii=False)}\n", out)
        # The same tokens as the ids given with --prompt (greedy).
        rc, out2, err = run("generate", model, "--prompt", prompt, "--max-tokens", 6, "--threads", 1)
        self.assertIn(f"-> {m.group(2)} (max tokens)", out2)
        # --json: one object on stdout, the report on stderr; a batch of --text and --text-file.
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "p.txt")
            with open(f, "w", encoding="utf-8") as fh:
                fh.write("def add(a, b):\n    return a + b\n")
            rc, out, err = run("generate", model, "--text", text, "--text-file", f, "--max-tokens", 6, "--threads", 1,
                               "--json")
            self.assertEqual(rc, 0, err)
            self.assertIn("prefill ", err)
            j = json.loads(out)
            self.assertEqual(len(j["sequences"]), 2)
            s0, s1 = j["sequences"]
            self.assertEqual(",".join(map(str, s0["prompt_ids"])), prompt)
            self.assertEqual(",".join(map(str, s0["ids"])), ids)
            self.assertEqual(s0["prompt_text"], text)
            self.assertEqual(s0["text"], json.loads(decoded)["text"])
            self.assertEqual(s0["finish_reason"], "length")
            self.assertEqual(s1["prompt_text"], "def add(a, b):\n    return a + b\n")
            self.assertEqual(len(s1["ids"]), 6)
            self.assertEqual(j["decode"]["tokens"] + j["prefill"]["tokens"], 2 * 5 + len(s0["prompt_ids"]) +
                             len(s1["prompt_ids"]))
            # --prompt ids with --json: ids only
            rc, out, err = run("generate", model, "--prompt", "1,2", "--max-tokens", 2, "--json", "--threads", 1)
            self.assertEqual(rc, 0, err)
            self.assertEqual(sorted(json.loads(out)["sequences"][0]), ["finish_reason", "ids", "prompt_ids"])
            # errors, all before the weights are read
            with open(f, "wb") as fh:
                fh.write(b"ok \xe6\xbc")
            err = self.fails(["generate", model, "--text-file", f])
            self.assertIn(f"kimi: generate: --text-file {f}: ", err)
            self.assertIn("at byte 3", err)
            self.fails(["generate", model, "--text-file", os.path.join(d, "nope.txt")],
                       f"kimi: generate: --text-file: {os.path.join(d, 'nope.txt')}: cannot open: no such file")
        self.fails(["generate", model, "--text", ""],
                   "kimi: generate: --text #1: expected text of at least one token, got an empty text")
        self.fails(["generate", model, "--text", "a", "--prompt", "1"],
                   "kimi: generate: expected prompts as --prompt token ids or as --text / --text-file, got both")
        self.fails(["generate", model],
                   "kimi: generate: expected a prompt: --prompt token ids, --text or --text-file, got none")
        self.fails(["generate", self.config_only, "--text", "hello"],
                   f"kimi: generate: --text: tokenizer: {self.config_only}/tiktoken.model: cannot open: no such file "
                   "(a text prompt needs the checkpoint's tiktoken.model and tokenizer_config.json)")
        self.fails(["generate", self.model, "--text", "hi", "--max-tokens", "1048575"],  # bytes only: 2 tokens
                   "generate: --max-tokens: expected a value in [1, 1048574] (the context limit of 1048576 tokens "
                   "less the longest text prompt, 2), got 1048575")

    # --- tokenize: a checkpoint's tokenizer ---------------------------------------------------------------
    TOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "text", "trained")

    def test_tokenize_round_trip_and_json(self):
        text = "Hello, 世界! I'm <|im_end|>\t\n"  # no \r: run() reads stdout with universal newlines
        rc, out, err = run("tokenize", self.TOK, "--text", text)
        self.assertEqual(rc, 0, err)
        ids = out.strip()
        self.assertRegex(ids, r"^\d+(,\d+)+$")
        rc, out, err = run("tokenize", self.TOK, "--ids", ids)
        self.assertEqual((rc, out), (0, text + "\n"), err)
        rc, out, err = run("tokenize", self.TOK, "--text", text, "--json")
        j = json.loads(out)
        self.assertEqual(j["count"], len(j["ids"]))
        self.assertEqual(",".join(map(str, j["ids"])), ids)
        self.assertFalse(any(t["special"] for t in j["tokens"]))  # user text: no special token
        rc, out, err = run("tokenize", self.TOK, "--text", text, "--specials", "<|im_end|>", "--json")
        j = json.loads(out)
        self.assertEqual([t["text"] for t in j["tokens"] if t["special"]], ["<|im_end|>"])
        rc, out, err = run("tokenize", self.TOK, "--ids", "230,188", "--json")  # 漢 cut short: U+FFFD
        self.assertEqual(json.loads(out), {"ids": [230, 188], "text": "\ufffd"})
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "t.txt")
            with open(f, "wb") as fh:
                fh.write(text.encode())
            rc, out, err = run("tokenize", self.TOK, "--text-file", f)
            self.assertEqual(out.strip(), ids)
            with open(f, "wb") as fh:
                fh.write(b"ok \xe6\xbc")
            self.fails(["tokenize", self.TOK, "--text-file", f],
                       f"kimi: tokenize: --text-file {f}: expected valid UTF-8, got a truncated sequence (0xE6) at byte 3")

    def test_tokenize_bad_flags(self):
        self.fails(["tokenize", self.TOK], "kimi: tokenize: expected exactly one of --text, --text-file and --ids, got none")
        self.fails(["tokenize", self.TOK, "--text", "a", "--ids", "1"],
                   "kimi: tokenize: expected exactly one of --text, --text-file and --ids, got 2")
        self.fails(["tokenize", self.TOK, "--ids", "1,,2"],
                   f"kimi: tokenize: --ids: expected comma-separated token ids in [0, 2012) (the vocabulary of "
                   f"{self.TOK}), got '' (item 2)")
        self.fails(["tokenize", self.TOK, "--ids", "2012"], "got '2012' (item 1)")
        self.fails(["tokenize", self.TOK, "--ids", "1", "--specials", "all"],
                   "kimi: tokenize: --specials: expected it only with --text or --text-file")
        self.fails(["tokenize", self.TOK, "--text", "a", "--specials", "<|im_end|>,<|nope|>"],
                   f"kimi: tokenize: --specials: expected none, all or special tokens of {self.TOK} (e.g. '[BOS]'), "
                   "got '<|nope|>'")
        self.fails(["tokenize", self.config_only, "--text", "a"],
                   f"kimi: tokenizer: {self.config_only}/tiktoken.model: cannot open: no such file")
        # random-model writes a tokenizer for the model's vocabulary (k3-tiny: 512 = 256 bytes + 256 specials)
        rc, out, err = run("tokenize", self.model, "--text", "<|open|>hi", "--specials", "all")
        self.assertEqual((rc, out), (0, "259,104,105\n"), err)


if __name__ == "__main__":
    KIMI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
