// The `kimi` command line.
//   kimi check [--filter OP] [--small]   every operator vs the fp64 oracle, one table
//   kimi random-model CONFIG --out DIR     a random checkpoint in the real HF layout (k3-tiny, k3-slice, ...)
//                                           and a tokenizer for its vocabulary (docs/text/tokenizer.md)
//   kimi inspect DIR [--device cuda]        config summary, tensors, bytes, parameter counts, placement
//   kimi generate DIR --prompt 1,2,3        generate tokens (greedy or sampled), tokens per second
//                 | --text "..."            a text prompt through DIR's tokenizer; prints the generated text
//                 [--device cuda[:i]]       on a GPU: blocks without CUDA kernels on the CPU (noted)
//                 [--ep N]                  under `mpirun -np N`: MoE layers expert-parallel over N CPU ranks
//   kimi plan CONFIG [--chip h200] [--batch N --prompt T --context C --target-tps R] [--json F --csv F]
//             [--ep N[,N...] --ep-batch B --ep-redundant R --nvlink-gbs X --ib-gbs Y --gpus-per-node G]
//                                           bytes, FLOPs and roofline speed of prefill and decode (cost.h)
//   kimi bench DIR | --random CONFIG       prefill (ppN) and decode (tgN) speed at batch sizes, llama-bench style
//                 [-p 512 -n 128 -b 1,8]    table, --json / --csv for plots, peak device memory per row
//                 [--ep N]                  under `mpirun -np N`: MoE layers expert-parallel, -b sequences per rank
//   kimi tokenize DIR --text "..." | --ids 1,2,3   a checkpoint's tokenizer: text to ids, ids to text [--json]
//   kimi serve DIR --port P [--slots N ...]  an OpenAI-compatible HTTP server with continuous batching
//   kimi chat DIR [--system TEXT ...]       an interactive chat in the terminal (one user turn per line of stdin)
#include <CLI/CLI.hpp>

#include "kimi/chat_cmd.h"
#include "kimi/check.h"
#include "kimi/error.h"
#include "kimi/model_cmds.h"
#include "kimi/plan_cmd.h"
#include "kimi/serve_cmd.h"
#include "kimi/tokenize_cmd.h"

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  CLI::App app{"kimi.cpp: Kimi K3 / Kimi-Linear operators and runtime"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows every default (subcommands inherit it)

  kimi::cli::CheckOptions check_opt;
  auto* check = app.add_subcommand("check", "Run every operator on every backend against the fp64 oracle");
  check->add_option("--filter", check_opt.filter, "Only operators whose name contains this");
  check->add_flag("--small", check_opt.small, "Use the small test sizes instead of model shapes");

  kimi::cli::RandomModelOptions rm;
  auto* random_model = app.add_subcommand("random-model",
                                         "Write a random checkpoint in the real HF layout, with a tokenizer for its "
                                         "vocabulary (tiktoken.model + tokenizer_config.json)");
  random_model->footer(kimi::cli::kNamedConfigsHelp);
  random_model->add_option("config", rm.config, "A named config (below) or a config.json path")->required();
  random_model->add_option("--out", rm.out,
                           "Output directory (created with its parents; one holding a checkpoint needs --force)")
      ->required();
  random_model->add_option("--seed", rm.seed, "Random seed, in [0, 2^64 - 1]");
  random_model->add_option("--shards", rm.shards,
                           "Number of safetensors shards, in [1, the tensor count] (index file when > 1)");
  random_model->add_option("--experts", rm.experts, "Routed expert storage: auto (MXFP4 for K3), mxfp4, bf16");
  random_model->add_flag("--force", rm.force, "Replace the checkpoint already in --out (its config.json, safetensors and tokenizer files)");

  std::string inspect_dir, inspect_device = "cpu";
  auto* inspect = app.add_subcommand("inspect", "Summarize a checkpoint directory");
  inspect->add_option("dir", inspect_dir, "Checkpoint directory (config.json + safetensors)")->required();
  inspect->add_option("--device", inspect_device, "Show where each block would run: cpu, cuda or cuda:i");

  kimi::cli::GenerateCmdOptions gen;
  auto* generate = app.add_subcommand("generate", "Generate tokens from prompts of token ids or text");
  generate->footer("Prompt + new tokens are limited to the context of 2^20 = 1048576 tokens; the cache grows with the\n"
                   "sequences, so a large --max-tokens that --stop cuts short costs no memory.\n");
  generate->add_option("dir", gen.dir, "Checkpoint directory (config.json + safetensors)")->required();
  generate->add_option("--prompt", gen.prompts, "Comma-separated token ids in [0, vocab); repeat for a batch");
  generate->add_option("--text", gen.texts,
                       "A prompt as text (UTF-8), encoded with DIR's tokenizer (tiktoken.model + "
                       "tokenizer_config.json; special-token strings stay text); repeat for a batch. The generated "
                       "text is printed when generation ends");
  generate->add_option("--text-file", gen.text_files, "A prompt as the text of a file (UTF-8); repeat for a batch");
  generate->add_flag("--json", gen.json,
                     "Print one JSON object on stdout (per sequence: prompt and generated ids, and text for text "
                     "prompts; finish reason; speed); the report goes to stderr");
  generate->add_option("--max-tokens", gen.max_tokens, "New tokens per sequence, in [1, 2^20 - longest prompt]");
  generate->add_option("--temperature", gen.temperature, "0 = greedy, else sample softmax(logits / T)");
  generate->add_option("--top-k", gen.top_k, "Sample among the k most likely tokens (0 = all)");
  generate->add_option("--top-p", gen.top_p, "Nucleus sampling mass in (0, 1]");
  generate->add_option("--seed", gen.seed, "Sampling seed, in [0, 2^64 - 1]");
  generate->add_option("--stop", gen.stop, "Stop token ids in [0, vocab) (the stop token is printed)");
  generate->add_option("--threads", gen.threads,
                       "CPU threads, in [0, " + std::to_string(kimi::cli::max_cpu_threads()) +
                           "] (0 = OpenMP default; at most this machine's CPUs)");
  generate->add_flag("--warmup,!--no-warmup", gen.warmup,
                     "On by default: time after an untimed warm-up (the batch's prefill + one decode step); "
                     "--no-warmup times the cold start");
  generate->add_option("--device", gen.device,
                       "cpu, cuda or cuda:i (blocks without CUDA kernels run on the CPU, with a note)");
  generate->add_option("--dtype", gen.dtype,
                       "Activation dtype between operators: auto (bf16 on a GPU, f32 on the CPU), f32 or bf16; the "
                       "residual stream, norms, router, KDA state, caches and logits stay f32");
  generate->add_option("--ep", gen.ep,
                       "Expert parallelism over N CPU ranks: run as `mpirun -np N kimi generate ... --ep N`; prompt i "
                       "runs on rank i mod N, rank 0 prints the report with the per-rank load (docs/ep.md); 0 = off");
  generate->add_option("--ep-placement", gen.ep_placement,
                       "With --ep: the experts' holders: round-robin (expert e on rank e mod N) or profile (homes "
                       "balanced on --ep-profile's expected loads, plus --ep-replicas extra holders of the hottest)");
  generate->add_option("--ep-profile", gen.ep_profile,
                       "With --ep-placement profile: a file of the E routed experts' expected pairs (numbers >= 0, "
                       "separated by whitespace or commas), the same for every MoE layer");
  generate->add_option("--ep-replicas", gen.ep_replicas,
                       "With --ep-placement profile: extra holders for the hottest experts (one each, 0..E)");
  generate->add_option("--ep-resident", gen.ep_resident,
                       "With --ep: all (every rank keeps every expert; any rank may compute any expert's pairs, loads "
                       "balanced to within one) or held (a rank keeps only the experts it holds and computes only "
                       "those: the least possible slowest-rank load under the placement); prints each rank's expert "
                       "weight memory");

  kimi::cli::PlanOptions plan_opt;
  auto* plan = app.add_subcommand("plan", "Bytes, FLOPs and roofline speed of a prefill and a decode step on chips");
  plan->footer(std::string("The prefill step is --batch sequences of --prompt new tokens from an empty cache; the decode\n"
                           "step is one new token for each of --batch sequences holding --context tokens. Every op is\n"
                           "timed max(bytes / bandwidth, FLOPs / peak); see docs/model/cost_model.md.\n") +
               kimi::cli::kNamedConfigsHelp +
               "Or a checkpoint directory. The real models: configs/kimi-linear-48b-a3b.json,\n"
               "configs/kimi-linear-48b-slice.json (its 4 first layers) and configs/k3.json.\n");
  plan->add_option("config", plan_opt.config, "A named config (below), a checkpoint directory or a config.json path")
      ->required();
  plan->add_option("--chip", plan_opt.chips, "h200 (measured here), h100 or b200; repeat for several (default h200)");
  plan->add_option("--bandwidth", plan_opt.bandwidth, "Another chip: its HBM bandwidth in GB/s (with --tflops)");
  plan->add_option("--tflops", plan_opt.tflops, "Another chip: its dense bf16 TFLOP/s (with --bandwidth)");
  plan->add_option("--batch", plan_opt.batch, "Sequences per step, in [1, 2^20]");
  plan->add_option("--prompt", plan_opt.prompt, "Prefill tokens per sequence, in [1, 2^20]");
  plan->add_option("--context", plan_opt.context, "Tokens in each sequence's cache at the decode step (default: --prompt)");
  plan->add_option("--target-tps", plan_opt.target_tps,
                   "Decode tokens/s PER SEQUENCE to reach: prints the HBM bandwidth it needs");
  plan->add_option("--dtype", plan_opt.dtype, "Activations and MLA latent / conv caches: bf16, f16 or f32");
  plan->add_option("--experts", plan_opt.experts, "Routed expert weights: auto (MXFP4 for K3 layout configs), bf16, mxfp4");
  plan->add_option("--json", plan_opt.json, "Also write everything as JSON to this file ('-': stdout, no table)");
  plan->add_option("--csv", plan_opt.csv, "Also write the per-op rows as CSV to this file ('-': stdout, no table)");
  plan->add_flag("--per-op", plan_opt.per_op, "Print every op of both steps (timed on the first chip)");
  plan->add_option("--ep", plan_opt.ep,
                   "Expert parallelism over N GPUs (comma-separated list): per-GPU step time, dispatch/combine volumes "
                   "and memory on the first chip, instead of the one-chip table");
  plan->add_option("--ep-batch", plan_opt.ep_batch, "With --ep: decode sequences per GPU (default 64); prefill is "
                   "--batch sequences of --prompt tokens per GPU");
  plan->add_option("--ep-redundant", plan_opt.ep_redundant,
                   "With --ep: redundant expert replica slots over all GPUs (default 0)");
  plan->add_option("--nvlink-gbs", plan_opt.nvlink_gbs,
                   "With --ep: NVLink GB/s per GPU per direction (default 450, H200)");
  plan->add_option("--ib-gbs", plan_opt.ib_gbs,
                   "With --ep: InfiniBand GB/s per GPU per direction (default 50, NDR 400 Gb/s)");
  plan->add_option("--gpus-per-node", plan_opt.gpus_per_node, "With --ep: GPUs per NVLink node (default 8)");
  plan->add_option("--ep-published", plan_opt.ep_published,
                   "With --ep: a published decode tok/s per GPU to print beside the prediction");

  kimi::cli::BenchCmdOptions bench_opt;
  auto* bench = app.add_subcommand("bench", "Time prefill (ppN) and decode (tgN) at batch sizes, llama-bench style");
  bench->footer(std::string("ppN at batch b: one forward of b sequences of N tokens each (b * N tokens). tgN at batch b:\n"
                            "N decode steps of b sequences after --context tokens each. Lists are comma-separated.\n") +
                kimi::cli::kNamedConfigsHelp);
  bench->add_option("model", bench_opt.model,
                    "Checkpoint directory; with --random a named config (below) or a config.json path")
      ->required();
  bench->add_flag("--random", bench_opt.random, "Random weights made on the device (no checkpoint is read)");
  bench->add_option("--experts", bench_opt.experts, "With --random: routed experts auto (MXFP4 for K3), mxfp4, bf16");
  bench->add_option("--device", bench_opt.device, "cpu, cuda or cuda:i");
  bench->add_option("-p,--prompt", bench_opt.prompt, "Prefill lengths N (rows ppN); 0: none");
  bench->add_option("-n,--gen", bench_opt.gen, "Decode steps N (rows tgN); 0: none");
  bench->add_option("-b,--batch", bench_opt.batch, "Sequences per forward");
  bench->add_option("--context", bench_opt.context, "Tokens per sequence in the cache before a tgN row's steps");
  bench->add_option("-r,--repetitions", bench_opt.repetitions, "Timed runs per row, in [1, 1000] (median, spread)");
  bench->add_option("--warmup", bench_opt.warmup, "Untimed runs per row before the timed ones, in [0, 100]");
  bench->add_option("--seed", bench_opt.seed, "Seed of the random weights and tokens, in [0, 2^64 - 1]");
  bench->add_option("--threads", bench_opt.threads, "CPU threads (0 = OpenMP default; at most this machine's CPUs)");
  bench->add_flag("--json{-}", bench_opt.json, "Also write JSON: --json (stdout; the table goes to stderr) or --json=PATH");
  bench->add_option("--chip", bench_opt.chip,
                    "Predicted / floor columns from the cost model on this chip: auto (h200 on a GPU, none on the "
                    "CPU), none, h200, h100 or b200. Floor: FLOPs at the chip's peak (pp), bytes at its bandwidth (tg)");
  bench->add_flag("--profile", bench_opt.profile,
                  "Per row, one more run timed operator by operator, beside the cost model's layer kinds");
  bench->add_flag("--csv{-}", bench_opt.csv, "Also write CSV: --csv (stdout; the table goes to stderr) or --csv=PATH");
  bench->add_option("--ep", bench_opt.ep,
                    "Expert parallelism over N CPU ranks: run as `mpirun -np N kimi bench ... --ep N`; -b is the batch "
                    "PER RANK (each rank runs every row on b sequences of its own); rank 0 prints the job's and one "
                    "rank's tokens/s and per row the pairs per rank, imbalance, moved pairs and EP phase times "
                    "(docs/ep.md); 0 = off");

  kimi::cli::TokenizeOptions tok_opt;
  auto* tokenize = app.add_subcommand("tokenize", "Text to token ids and ids to text with a checkpoint's tokenizer");
  tokenize->footer("The tokenizer is the checkpoint's tiktoken.model and tokenizer_config.json, applied as\n"
                   "tokenization_kimi.py applies them with tiktoken (docs/text/tokenizer.md). Text never becomes\n"
                   "a special token unless --specials allows it.\n");
  tokenize->add_option("dir", tok_opt.dir, "Checkpoint directory (tiktoken.model + tokenizer_config.json)")->required();
  tokenize->add_option("--text", tok_opt.text, "Text (UTF-8) to encode");
  tokenize->add_option("--text-file", tok_opt.text_file, "A file whose bytes (UTF-8) to encode");
  tokenize->add_option("--ids", tok_opt.ids, "Comma-separated token ids to decode");
  tokenize->add_option("--specials", tok_opt.specials,
                       "Special tokens the text may contain: none, all, or comma-separated names");
  tokenize->add_flag("--json", tok_opt.json, "Print JSON: ids and each token's text (or bytes), or ids and text");

  kimi::cli::ServeOptions serve_opt;
  auto* serve = app.add_subcommand("serve", "An OpenAI-compatible HTTP server (continuous batching over cache slots)");
  serve->footer("Endpoints: POST /v1/completions, /v1/chat/completions (stream via SSE or not); GET /v1/models,\n"
                "/health, /metrics (Prometheus). SIGINT / SIGTERM stop it. docs/serve.md has the details.\n");
  serve->add_option("dir", serve_opt.dir, "Checkpoint directory (config.json, safetensors, tiktoken.model, "
                                          "tokenizer_config.json)")->required();
  serve->add_option("--device", serve_opt.device, "cpu, cuda or cuda:i");
  serve->add_option("--host", serve_opt.host, "Address to listen on");
  serve->add_option("--port", serve_opt.port, "Port to listen on, in [0, 65535] (0: any free port, printed)");
  serve->add_option("--slots", serve_opt.slots, "Requests generating at once (cache slots), in [1, 4096]");
  serve->add_option("--ctx-size", serve_opt.ctx_size, "Tokens per request, prompt + new tokens, in [2, 2^20]");
  serve->add_option("--max-batch-tokens", serve_opt.max_batch_tokens,
                    "Tokens per step (decode tokens + chunked-prefill pieces), in [--slots, 2^20]");
  serve->add_option("--max-queue", serve_opt.max_queue, "Requests waiting for a slot beyond which new ones get 503");
  serve->add_option("--model-name", serve_opt.model_name, "The model's name in the API (default: DIR's name)");
  serve->add_option("--threads", serve_opt.threads, "CPU threads (0 = OpenMP default; at most this machine's CPUs)");
  serve->add_option("--prefix-cache-mb", serve_opt.prefix_cache_mb,
                    "MiB of exact prefix-cache snapshots, on the KV cache's devices (0: off), in [0, 2^30]");
  serve->add_option("--prefix-grid", serve_opt.prefix_grid,
                    "Prompt prefixes are snapshotted at multiples of this many tokens (a multiple of 64)");

  kimi::cli::ChatOptions chat_opt;
  auto* chat = app.add_subcommand("chat", "An interactive chat with a checkpoint in the terminal (text in, text out)");
  chat->footer("One user turn per line of stdin (a terminal or a pipe). /reset clears the history; /exit, Ctrl-D or\n"
               "Ctrl-C at the prompt end the chat; Ctrl-C during a reply stops the reply. Each turn renders the whole\n"
               "conversation in the checkpoint's chat format and prefills it again. docs/chat.md has the details.\n");
  chat->add_option("dir", chat_opt.dir, "Checkpoint directory (config.json, safetensors, tiktoken.model, "
                                        "tokenizer_config.json)")->required();
  chat->add_option("--system", chat_opt.system, "A system message opening the conversation");
  chat->add_option("--device", chat_opt.device, "cpu, cuda or cuda:i");
  chat->add_option("--max-tokens", chat_opt.max_tokens,
                   "New tokens per reply, in [1, --ctx-size - 1] (cut to what the context leaves)");
  chat->add_option("--temperature", chat_opt.temperature, "0 = greedy, else sample softmax(logits / T)");
  chat->add_option("--top-p", chat_opt.top_p, "Nucleus sampling mass in (0, 1]");
  chat->add_option("--top-k", chat_opt.top_k, "Sample among the k most likely tokens (0 = all)");
  chat->add_option("--seed", chat_opt.seed, "Sampling seed, in [0, 2^64 - 1] (turn k draws sequence k)");
  chat->add_option("--ctx-size", chat_opt.ctx_size,
                   "Tokens of the conversation (rendered history + the reply), in [2, the model's context limit]");
  chat->add_flag("--thinking,!--no-thinking", chat_opt.thinking,
                 "K3 format: the reply opens with a thinking block (on by default); not for the K2 format");
  chat->add_option("--threads", chat_opt.threads,
                   "CPU threads, in [0, " + std::to_string(kimi::cli::max_cpu_threads()) + "] (0 = OpenMP default)");
  chat->add_flag("--print-ids", chat_opt.print_ids, "Print each turn's prompt ids and generated ids on stderr");
  chat->add_flag("--ignore-eos", chat_opt.ignore_eos,
                 "Do not end a reply at the format's turn-end tokens: every reply runs to --max-tokens (or Ctrl-C)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (check->parsed()) return kimi::cli::run_check(check_opt) == 0 ? 0 : 1;
    if (random_model->parsed()) return kimi::cli::run_random_model(rm);
    if (inspect->parsed()) return kimi::cli::run_inspect(inspect_dir, inspect_device);
    if (generate->parsed()) return kimi::cli::run_generate(gen);
    if (plan->parsed()) {
      plan_opt.json_given = plan->count("--json") > 0;
      plan_opt.csv_given = plan->count("--csv") > 0;
      for (const char* f :
           {"--ep-batch", "--ep-redundant", "--nvlink-gbs", "--ib-gbs", "--gpus-per-node", "--ep-published"})
        if (plan->count(f) > 0) plan_opt.ep_given.push_back(f);
      return kimi::cli::run_plan(plan_opt);
    }
    if (bench->parsed()) return kimi::cli::run_bench(bench_opt);
    if (serve->parsed()) return kimi::cli::run_serve(serve_opt);
    if (chat->parsed()) {
      chat_opt.max_tokens_given = chat->count("--max-tokens") > 0;
      chat_opt.thinking_given = chat->count("--thinking") + chat->count("--no-thinking") > 0;
      return kimi::cli::run_chat(chat_opt);
    }
    if (tokenize->parsed()) {
      tok_opt.text_given = tokenize->count("--text") > 0;
      tok_opt.text_file_given = tokenize->count("--text-file") > 0;
      tok_opt.ids_given = tokenize->count("--ids") > 0;
      return kimi::cli::run_tokenize(tok_opt);
    }
  } catch (const kimi::Error& e) {
    std::fprintf(stderr, "kimi: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // not expected: every bad input is a kimi::Error
    std::fprintf(stderr, "kimi: %s\n", e.what());
    return 3;
  }
  return 0;
}
