// kimi/model/placement.h without a GPU: the placement rule on both tiny configs with fake operator
// predicates (all supported, none, MLA missing, MoE missing), the notes it prints once, the summary,
// the CPU plan, and that every block kind lists real operators.
#include <gtest/gtest.h>

#include <algorithm>

#include "kimi/device.h"
#include "kimi/log.h"
#include "kimi/model/placement.h"

namespace kimi::model {
namespace {

const Device gpu = Device::cuda(0), cpu = Device::cpu();

bool all_ops_supported(std::string_view, Device) { return true; }
bool no_ops_supported(std::string_view, Device d) { return d.type == DeviceType::cpu; }
OpSupported without(std::vector<std::string_view> missing) {
  return [missing](std::string_view op, Device d) {
    return d.type == DeviceType::cpu || std::find(missing.begin(), missing.end(), op) == missing.end();
  };
}

int64_t count_kda(const Config& c) {
  int64_t n = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) n += c.is_kda_layer(i);
  return n;
}

TEST(Placement, EveryBlockKindCallsRealOperators) {
  for (int k = 0; k <= int(BlockKind::head); ++k) {
    EXPECT_FALSE(block_ops(BlockKind(k)).empty()) << block_name(BlockKind(k));
    for (std::string_view op : block_ops(BlockKind(k)))
      EXPECT_NE(std::find(all_ops().begin(), all_ops().end(), std::string(op)), all_ops().end())
          << block_name(BlockKind(k)) << " lists '" << op << "', not an operator of the API";
  }
}

TEST(Placement, BlocksInModelOrder) {
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    const Config c = named_config(name);
    const Placement p = plan_placement(c, gpu, all_ops_supported);
    const bool ar = c.attn_res_block_size.has_value();
    // embedding, per layer ([mix] mixer [mix] ffn), [output mix], head
    ASSERT_EQ(int64_t(p.blocks.size()), 2 + c.num_hidden_layers * (ar ? 4 : 2) + (ar ? 1 : 0)) << name;
    EXPECT_EQ(p.blocks.front().kind, BlockKind::embedding);
    EXPECT_EQ(p.blocks.back().kind, BlockKind::head);
    size_t b = 1;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (ar) {
        EXPECT_EQ(p.blocks[b++].kind, BlockKind::attn_res_mix);
      }
      EXPECT_EQ(p.blocks[b].kind, c.is_kda_layer(i) ? BlockKind::kda_mixer : BlockKind::mla_mixer);
      EXPECT_EQ(p.blocks[b++].layer, i);
      if (ar) {
        EXPECT_EQ(p.blocks[b++].kind, BlockKind::attn_res_mix);
      }
      EXPECT_EQ(p.blocks[b++].kind, c.is_moe_layer(i) ? BlockKind::moe_ffn : BlockKind::dense_ffn);
    }
    if (ar) {
      EXPECT_EQ(p.blocks[b].kind, BlockKind::attn_res_mix);
    }
    ASSERT_EQ(int64_t(p.layers.size()), c.num_hidden_layers);
  }
}

TEST(Placement, AllSupportedPutsEverythingOnTheGpu) {
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    const Placement p = plan_placement(named_config(name), gpu, all_ops_supported);
    for (const Placement::Block& b : p.blocks) EXPECT_EQ(b.device, gpu) << name << " " << block_name(b.kind);
    for (const Placement::Layer& L : p.layers)
      EXPECT_TRUE(L.mixer == gpu && L.ffn == gpu && L.attn_mix == gpu && L.ffn_mix == gpu);
    EXPECT_EQ(p.embedding, gpu);
    EXPECT_EQ(p.head, gpu);
    EXPECT_EQ(p.output_mix, gpu);
    EXPECT_TRUE(p.notes.empty()) << p.notes.front();
    EXPECT_EQ(p.summary().find("cpu"), std::string::npos) << p.summary();
  }
}

TEST(Placement, NoneSupportedPutsEverythingOnTheCpuWithOneNotePerKind) {
  const Config c = named_config("k3-tiny");
  const Placement p = plan_placement(c, gpu, no_ops_supported);
  for (const Placement::Block& b : p.blocks) EXPECT_EQ(b.device, cpu) << block_name(b.kind);
  // k3-tiny has every kind: embedding, AttnRes mixes, KDA and MLA mixers, dense and MoE FFNs, head
  ASSERT_EQ(p.notes.size(), 7u);
  EXPECT_EQ(p.notes[0], "the embedding runs on the CPU: no CUDA kernel for gather_rows; its inputs and outputs cross "
                        "PCIe each step");
  const int64_t L = c.num_hidden_layers, kda = count_kda(c);
  EXPECT_EQ(p.notes[1], "all " + std::to_string(2 * L + 1) +
                            " AttnRes mixes run on the CPU: no CUDA kernel for attn_res; their inputs and outputs cross "
                            "PCIe each step");
  EXPECT_EQ(p.notes[2], std::to_string(kda) + " of " + std::to_string(L) +
                            " layers' KDA mixers run on the CPU: no CUDA kernel for rms_norm, linear, short_conv_fwd, "
                            "kda_chunk_fwd, gated_rms_norm, kda_decode_step; their inputs and outputs cross PCIe each step");
  EXPECT_NE(p.notes[3].find("layers' MLA mixers run on the CPU"), std::string::npos) << p.notes[3];
  EXPECT_NE(p.notes[6].find("the head runs on the CPU: no CUDA kernel for gather_rows, rms_norm, linear"),
            std::string::npos) << p.notes[6];
  EXPECT_EQ(p.summary().find("cuda"), std::string::npos) << p.summary();
}

TEST(Placement, MlaMissingKeepsOnlyTheMlaMixersOnTheCpu) {
  const Config c = named_config("kimi-linear-tiny");
  const Placement p = plan_placement(c, gpu, without({"mla_decode", "mla_prefill"}));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    EXPECT_EQ(p.layers[size_t(i)].mixer, c.is_kda_layer(i) ? gpu : cpu) << "layer " << i;
    EXPECT_EQ(p.layers[size_t(i)].ffn, gpu) << "layer " << i;
  }
  const int64_t mla = c.num_hidden_layers - count_kda(c);
  ASSERT_GT(mla, 0);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0], std::to_string(mla) + " of " + std::to_string(c.num_hidden_layers) +
                            " layers' MLA mixers run on the CPU: no CUDA kernel for mla_prefill, mla_decode; their "
                            "inputs and outputs cross PCIe each step");
  EXPECT_EQ(p.count(BlockKind::mla_mixer, cpu), mla);
  EXPECT_EQ(p.count(BlockKind::kda_mixer, gpu), count_kda(c));
  EXPECT_EQ(p.summary(), "cuda:0: embedding, " + std::to_string(count_kda(c)) + " KDA mixers, " +
                             std::to_string(p.count(BlockKind::dense_ffn, gpu)) + " dense FFN" +
                             (p.count(BlockKind::dense_ffn, gpu) == 1 ? "" : "s") + ", " +
                             std::to_string(p.count(BlockKind::moe_ffn, gpu)) + " MoE FFNs, head; cpu: " +
                             std::to_string(mla) + " MLA mixer" + (mla == 1 ? "" : "s"));
}

TEST(Placement, MoeMissingKeepsOnlyTheMoeFfnsOnTheCpu) {
  for (const char* name : {"k3-tiny", "kimi-linear-tiny"}) {
    const Config c = named_config(name);
    const Placement p = plan_placement(c, gpu, without({"latent_moe"}));
    int64_t moe = 0;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      EXPECT_EQ(p.layers[size_t(i)].ffn, c.is_moe_layer(i) ? cpu : gpu) << name << " layer " << i;
      EXPECT_EQ(p.layers[size_t(i)].mixer, gpu);
      moe += c.is_moe_layer(i);
    }
    ASSERT_GT(moe, 0) << name;
    ASSERT_EQ(p.notes.size(), 1u) << name;
    EXPECT_NE(p.notes[0].find(std::to_string(moe) + " of " + std::to_string(c.num_hidden_layers) +
                              " layers' MoE FFNs run on the CPU: no CUDA kernel for latent_moe"),
              std::string::npos)
        << p.notes[0];
  }
}

TEST(Placement, CpuDeviceNeedsNoKernelsAndNotesNothing) {
  const Placement p = plan_placement(named_config("k3-tiny"), cpu, no_ops_supported);
  for (const Placement::Block& b : p.blocks) EXPECT_EQ(b.device, cpu);
  EXPECT_TRUE(p.notes.empty());
  EXPECT_EQ(p.summary().rfind("cpu: embedding, ", 0), 0u) << p.summary();
}

#ifndef KIMI_WITH_CUDA
// A build without the CUDA backend only (tests/cuda_tests.h): with it, the real predicate places blocks on the GPU.
TEST(Placement, TheRealPredicateWithoutCudaIsAllCpu) {
  const Placement p = plan_placement(named_config("k3-tiny"), gpu, op_supported);
  for (const Placement::Block& b : p.blocks) EXPECT_EQ(b.device, cpu);
  EXPECT_EQ(p.notes.size(), 7u);
}
#endif

TEST(Log, NotesGoToTheInstalledHandler) {
  std::vector<std::string> got;
  const NoteHandler old = set_note_handler([&](std::string_view n) { got.emplace_back(n); });
  note("one");
  note("two");
  set_note_handler(old);
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two"}));
}

}  // namespace
}  // namespace kimi::model
