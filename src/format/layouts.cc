// The model shapes behind Synthesize(): Llama-family decoders as stored by
// Hugging Face transformers (LlamaForCausalLM state dict, bf16).
#include <string>

#include "format/header.h"
#include "format/synth.h"

namespace weightlift::internal {
namespace {

struct LlamaConfig {
  const char* name;
  const char* description;
  uint64_t vocab;
  uint64_t hidden;
  uint64_t intermediate;
  uint64_t kv_dim;  // num_key_value_heads * head_dim (GQA when < hidden)
  int layers;
};

constexpr LlamaConfig kConfigs[] = {
    {"llama2-7b", "Llama-2-7B: 32 layers, hidden 4096, MLP 11008, vocab 32000",
     32000, 4096, 11008, 4096, 32},
    {"llama2-13b",
     "Llama-2-13B: 40 layers, hidden 5120, MLP 13824, vocab 32000", 32000, 5120,
     13824, 5120, 40},
    {"llama3-8b",
     "Llama-3-8B: 32 layers, hidden 4096, MLP 14336, vocab 128256, GQA k/v "
     "1024",
     128256, 4096, 14336, 1024, 32},
    {"tinyllama-1.1b",
     "TinyLlama-1.1B: 22 layers, hidden 2048, MLP 5632, vocab 32000, GQA k/v "
     "256",
     32000, 2048, 5632, 256, 22},
    {"tiny",
     "tiny Llama-style: 2 layers, hidden 256, MLP 688, vocab 2048, "
     "GQA k/v 128 (a few MB)",
     2048, 256, 688, 128, 2},
};

std::vector<SynthTensor> Build(const LlamaConfig& c) {
  std::vector<SynthTensor> out;
  auto add = [&](std::string name, std::vector<uint64_t> shape, int unit) {
    SynthTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.unit = unit;
    t.bytes = *TensorBytes(t.shape, t.dtype, t.name);  // small: cannot fail
    out.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", {c.vocab, c.hidden}, 0);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int u = l + 1;
    add(p + "self_attn.q_proj.weight", {c.hidden, c.hidden}, u);
    add(p + "self_attn.k_proj.weight", {c.kv_dim, c.hidden}, u);
    add(p + "self_attn.v_proj.weight", {c.kv_dim, c.hidden}, u);
    add(p + "self_attn.o_proj.weight", {c.hidden, c.hidden}, u);
    add(p + "mlp.gate_proj.weight", {c.intermediate, c.hidden}, u);
    add(p + "mlp.up_proj.weight", {c.intermediate, c.hidden}, u);
    add(p + "mlp.down_proj.weight", {c.hidden, c.intermediate}, u);
    add(p + "input_layernorm.weight", {c.hidden}, u);
    add(p + "post_attention_layernorm.weight", {c.hidden}, u);
  }
  add("model.norm.weight", {c.hidden}, c.layers + 1);
  add("lm_head.weight", {c.vocab, c.hidden}, c.layers + 1);
  return out;
}

}  // namespace

std::vector<LayoutSummary> ListLayouts() {
  std::vector<LayoutSummary> out;
  for (const LlamaConfig& c : kConfigs) {
    LayoutSummary s;
    s.name = c.name;
    s.description = c.description;
    for (const SynthTensor& t : Build(c)) {
      ++s.num_tensors;
      s.total_bytes += t.bytes;
      s.num_params += t.bytes / 2;  // every tensor is BF16
    }
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<std::vector<SynthTensor>> LayoutTensors(std::string_view layout) {
  std::string known;
  for (const LlamaConfig& c : kConfigs) {
    if (layout == c.name) return Build(c);
    known += known.empty() ? "" : ", ";
    known += c.name;
  }
  return Status::InvalidArgument("unknown layout \"" + std::string(layout) +
                                 "\" (known: " + known + ")");
}

}  // namespace weightlift::internal
