// Implementation of kimi/model/checkpoint.h.
#include "kimi/model/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "kimi/error.h"
#include "kimi/model/random_weights.h"
#include "model/loader_io.h"

namespace kimi::model {

namespace {
std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

void check_tensor(const std::string& dir, const TensorSpec& spec, const TensorInfo& t) {
  bool shape_ok = t.shape == spec.shape;
  for (const auto& alt : spec.alt_shapes) shape_ok = shape_ok || t.shape == alt;
  if (!shape_ok)
    throw Error("checkpoint " + dir + ": tensor '" + spec.name + "': expected shape " + shape_str(spec.shape) +
                " (from config.json), got " + shape_str(t.shape));
  const bool mx = spec.role == TensorRole::mxfp4_packed || spec.role == TensorRole::mxfp4_scale;
  const bool dtype_ok = mx ? t.dtype == DType::u8 : is_float(t.dtype);
  if (!dtype_ok)
    throw Error("checkpoint " + dir + ": tensor '" + spec.name + "': expected dtype " + (mx ? "U8" : "F32/BF16/F16") +
                ", got " + std::string(dtype_name(t.dtype)));
}
}  // namespace

ModelFiles open_model(const std::string& dir) {
  Config cfg = load_model_config(dir);
  Checkpoint ck(dir);
  SchemaOptions opt;
  for (const std::string& n : ck.names())
    if (n.size() > 14 && n.compare(n.size() - 14, 14, ".weight_packed") == 0) opt.mxfp4_experts = true;
  // The dense layers' MLP spelling (schema.h DenseMlpName), as the first dense layer has it; every dense layer
  // must then use the same one.
  int64_t first_dense = -1;
  for (int64_t i = 0; i < cfg.num_hidden_layers && first_dense < 0; ++i)
    if (!cfg.is_moe_layer(i)) first_dense = i;
  if (first_dense >= 0) {
    const std::string L = tensor_prefix(cfg) + "layers." + std::to_string(first_dense) + ".";
    const std::string as_mlp = L + "mlp.gate_proj.weight", as_moe = L + "block_sparse_moe.gate_proj.weight";
    if (ck.has(as_mlp) && ck.has(as_moe))
      throw Error("checkpoint " + dir + ": dense layer " + std::to_string(first_dense) +
                  ": expected its MLP under one name, got both '" + as_mlp + "' and '" + as_moe + "'");
    if (ck.has(as_moe)) opt.dense_mlp = DenseMlpName::block_sparse_moe;
  }
  std::vector<TensorSpec> schema = checkpoint_schema(cfg, opt);
  const std::string dense_infix = std::string(".") + dense_mlp_prefix(opt.dense_mlp);
  std::set<std::string> named;
  for (const TensorSpec& s : schema) {
    if (!ck.has(s.name)) {
      std::string why = "required by config.json";
      const size_t at = s.name.find(dense_infix);
      if (s.layer >= 0 && !cfg.is_moe_layer(s.layer) && at != std::string::npos) {
        if (s.layer == first_dense)  // neither spelling there
          why += "; nor is it there as '" + s.name.substr(0, at) + ".block_sparse_moe." +
                 s.name.substr(at + dense_infix.size()) + "', as transformers 5 saves it";
        else
          why += std::string("; dense MLPs are read under '") + dense_mlp_prefix(opt.dense_mlp) +
                 "', as dense layer " + std::to_string(first_dense) + " spells it";
      }
      throw Error("checkpoint " + dir + ": missing tensor '" + s.name + "' (" + why + ")");
    }
    check_tensor(dir, s, ck.info(s.name));
    named.insert(s.name);
    // SPEC 5: A_log may be stored padded (K3: fp32[128], first H meaningful); the tail must be zero.
    if (s.name.size() >= 5 && s.name.compare(s.name.size() - 5, 5, "A_log") == 0) {
      const TensorView a = ck.get(s.name);
      for (int64_t i = cfg.kda_num_heads; i < a.numel(); ++i)
        if (load_as_f32(a.data, a.dtype, i) != 0.f)
          throw Error("checkpoint " + dir + ": tensor '" + s.name + "': expected zeros after the first " +
                      std::to_string(cfg.kda_num_heads) + " (num_heads) entries, got " +
                      std::to_string(load_as_f32(a.data, a.dtype, i)) + " at index " + std::to_string(i));
    }
  }
  std::vector<std::string> unused;
  for (const std::string& n : ck.names())
    if (!named.count(n)) unused.push_back(n);
  return ModelFiles{std::move(cfg), opt, std::move(schema), std::move(ck), std::move(unused)};
}

void write_random_model(const std::string& dir, const Config& c, const SchemaOptions& opt, uint64_t seed, int shards) {
  namespace fs = std::filesystem;
  const std::vector<TensorSpec> schema = checkpoint_schema(c, opt);
  if (shards < 1 || size_t(shards) > schema.size())
    throw Error("write_random_model: shards: expected a value in [1, " + std::to_string(schema.size()) +
                "] (at least one tensor per shard), got " + std::to_string(shards));
  // Filesystem failures become kimi::Errors naming the path and the reason.
  auto fs_fail = [&](const std::string& what, const fs::path& p, const std::error_code& ec) {
    throw Error("write_random_model: " + what + " '" + p.string() + "': " + ec.message());
  };
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fs_fail("cannot create the directory", dir, ec);
  if (!fs::is_directory(dir, ec)) fs_fail("cannot write into", dir, std::make_error_code(std::errc::not_a_directory));
  // A checkpoint written earlier into the same directory (e.g. with another shard count) would leave an
  // index or shards that shadow or mix with this one: remove the safetensors files of the HF layout first.
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool ours = n == "model.safetensors" || n == "model.safetensors.index.json" ||
                      (n.rfind("model-", 0) == 0 && n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0);
    if (ours && e.is_regular_file() && !fs::remove(e.path(), ec) && ec) fs_fail("cannot remove", e.path(), ec);
  }
  if (ec) fs_fail("cannot list", dir, ec);
  const fs::path config_path = fs::path(dir) / "config.json";
  std::ofstream config_out(config_path);
  config_out << config_to_json(c) << "\n";
  if (!config_out.flush())
    fs_fail("cannot write", config_path, std::error_code(errno ? errno : EIO, std::generic_category()));
  // The values of kimi/model/random_weights.h, drawn in the schema's order from one generator.
  std::mt19937_64 rng(seed);
  std::vector<Tensor> data;
  data.reserve(schema.size());
  for (const TensorSpec& s : schema) {
    const RandomInit r = random_init(s, c);
    Tensor t(r.dtype, s.shape);  // zero-filled: the tail past r.count stays 0
    if (r.dtype == DType::u8) {
      std::uniform_int_distribution<int> u(r.lo, r.hi);
      for (int64_t i = 0; i < r.count; ++i) t.data_as<uint8_t>()[i] = uint8_t(u(rng));
    } else {
      std::uniform_real_distribution<float> u(-r.bound, r.bound);
      for (int64_t i = 0; i < r.count; ++i) {
        const float v = r.offset + r.scale * u(rng);
        if (r.dtype == DType::f32) {
          t.data_as<float>()[i] = v;
        } else {
          t.data_as<uint16_t>()[i] = f32_to_bf16(v);
        }
      }
    }
    data.push_back(std::move(t));
  }
  // Contiguous runs of the schema's order (layer by layer) into shards of near-equal tensor counts: every shard
  // holds at least one tensor (shards <= tensors), a layer spans at most a shard boundary.
  std::vector<std::vector<TensorToWrite>> parts(static_cast<size_t>(shards));
  for (size_t i = 0; i < schema.size(); ++i) parts[i * size_t(shards) / schema.size()].push_back({schema[i].name, data[i]});
  if (shards == 1) {
    write_safetensors((fs::path(dir) / "model.safetensors").string(), parts[0], {{"format", "pt"}});
    return;
  }
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  for (int k = 0; k < shards; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, shards);
    write_safetensors((fs::path(dir) / name).string(), parts[size_t(k)], {{"format", "pt"}});
    for (const TensorToWrite& t : parts[size_t(k)]) index["weight_map"][t.name] = name;
  }
  std::ofstream(fs::path(dir) / "model.safetensors.index.json") << index.dump(2) << "\n";
}

}  // namespace kimi::model
