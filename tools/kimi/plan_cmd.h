// tools/kimi/plan_cmd.h: `kimi plan`, the cost model of the forward (kimi/model/cost.h) for a config, a
// workload and chips: bytes and FLOPs per step (and per op), the roofline speed of prefill and decode, and the HBM
// bandwidth a target decode speed needs.
//
// The prefill step is `--batch` sequences of `--prompt` new tokens each, from an empty cache; the decode step is
// one new token for each of `--batch` sequences holding `--context` tokens (default: --prompt). `--target-tps` is
// decode tokens/s PER SEQUENCE (the speed one user sees; the aggregate is that times --batch). Every flag is
// checked before anything is computed or written; errors name the flag as typed (`plan: --batch: expected ...`).
// `--ep N[,N...]` predicts a step under expert parallelism over N GPUs instead (plan_ep.h, docs/model/cost_model.md).
#pragma once

#include <string>
#include <vector>

namespace kimi::cli {

struct PlanOptions {
  std::string config;              // a named config, a checkpoint directory or a config.json path
  std::vector<std::string> chips;  // named chips (h200, h100, b200); none: h200, unless --bandwidth names a chip
  std::string bandwidth;           // GB/s of a chip given on the command line (with --tflops); "" = none
  std::string tflops;              // its dense bf16 TFLOP/s
  // Integers and rates are parsed here (not by CLI11) so that every bad value gets the same kind of message.
  std::string batch = "1";
  std::string prompt = "2048";
  std::string context;             // "" = --prompt
  std::string target_tps;          // "" = none
  std::string dtype = "bf16";      // activations and the MLA latent / conv caches: bf16, f16 or f32
  std::string experts = "auto";    // routed expert storage: auto (MXFP4 for K3 layout configs), bf16, mxfp4
  std::string json, csv;           // output files ("-": stdout, instead of the table)
  bool json_given = false, csv_given = false;  // the flag was on the command line (an empty path is an error)
  bool per_op = false;             // print every op of both steps
  // Expert parallelism (kimi/model/cost_ep.h): with --ep, the EP table per rank count instead of the one-chip table.
  std::string ep;                  // rank counts, comma-separated ("16,32,64"); "" = no EP
  std::string ep_batch = "64";     // decode sequences per rank (prefill: --batch sequences of --prompt per rank)
  std::string ep_redundant = "0";  // redundant expert replica slots over all ranks
  std::string nvlink_gbs = "450";  // GB/s per GPU per direction inside a node (H200 NVLink 4)
  std::string ib_gbs = "50";       // GB/s per GPU per direction between nodes (InfiniBand NDR 400 Gb/s)
  std::string gpus_per_node = "8";
  std::string ep_published;        // a published decode tok/s per GPU to print beside the prediction; "" = none
  std::vector<std::string> ep_given;  // the EP flags present on the command line (an EP flag without --ep is an error)
};
int run_plan(const PlanOptions& opt);

}  // namespace kimi::cli
