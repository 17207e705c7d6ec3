// poslab fixture: writes a tiny model's weights, a batch, and poslab's logits, loss and gradients,
// for the PyTorch reference twin (scripts/reference/) to reproduce: the llm.c-style oracle check.
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/validators.h"
#include "data/corpus.h"
#include "model/fused_ops.h"
#include "model/gpt.h"
#include "train/run_dir.h"
#include "util/files.h"

namespace poslab::cli {

void add_fixture(CLI::App& app) {
  struct Opts {
    std::string config, out;
    std::vector<std::string> sets;
    int batch = 2;
    double pos_noise = 0;
    std::string device = "cpu";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("fixture", "Write weights, a batch and poslab's logits/loss/gradients (fp32) for "
                                            "the PyTorch reference twin");
  cmd->add_option("--config,-c", o->config, "Config file")->required();
  cmd->add_option("--set,-s", o->sets, "Override a key (repeatable)");
  cmd->add_option("--out,-o", o->out, "Output directory")->required();
  cmd->add_option("--batch", o->batch, "Sequences in the batch (default 2)")->check(positive_integer());
  cmd->add_option("--pos-noise", o->pos_noise,
                  "Add N(0, s) to the encoding's parameters first (CoPE's zero-initialised table would hide it; default 0)")
      ->check(number_at_least(0, false, "a number >= 0"));
  cmd->add_option("--device", o->device,
                  "cpu (default) or cuda: where the forward and backward run (fp32, TF32 off: the twin's precision)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->callback([o] {
    Config c = load_config(o->config, o->sets);
    // No become_training_process(): one forward and backward on a few sequences gains nothing from spinning
    // OpenMP workers, and the re-exec would load LibTorch a second time (0.2-0.4 s of each fixture).
    set_fused_ops(c.train.fused_ops);  // no Runtime here (fp32), but the switch holds
    if (o->device == "cuda" && !torch::cuda::is_available())
      throw ConfigError("fixture --device cuda: no CUDA device is available");
    const torch::Device device(o->device == "cuda" ? torch::kCUDA : torch::kCPU);
    if (device.is_cuda()) {  // fp32 products, as the twin's on the CPU: TF32 would round inputs to 10 bits
      at::globalContext().setAllowTF32CuBLAS(false);
      at::globalContext().setAllowTF32CuDNN(false);
    }
    auto corpus = make_corpus(c);
    c.model.vocab_size = static_cast<int>(corpus->tokenizer().size());
    torch::manual_seed(c.seed);
    GPT model(c.model);
    model->train();  // dropout must be 0 for a deterministic comparison
    if (o->pos_noise > 0) {
      torch::NoGradGuard no_grad;
      for (auto& p : model->pos->parameters()) p.add_(torch::randn_like(p) * o->pos_noise);
    }
    model->to(device);  // after the CPU draws above: the weights are the same on either device
    if (c.model.dropout > 0) throw ConfigError("fixture: model.dropout must be 0 for a reproducible comparison");
    Rng rng(static_cast<uint64_t>(c.seed));
    auto batch = corpus->batch(Split::Train, o->batch, rng);
    // Drawn here and written out, so the twin uses the same (randomized) positions.
    auto positions = model->pos->positions(batch.x.size(1), /*training=*/true, device);
    auto logits = model->forward(batch.x.to(device), positions);
    auto loss = GPTImpl::loss(logits, batch.y.to(device));
    loss.backward();
    const auto cpu = [](const torch::Tensor& t) { return t.detach().to(torch::kCPU).contiguous(); };
    std::filesystem::create_directories(o->out);
    RunPaths paths{o->out};
    write_file_atomic(paths.config(), config_to_json(c).dump(2) + "\n");
    c10::Dict<std::string, at::Tensor> fixture;
    fixture.insert("x", batch.x);
    fixture.insert("y", batch.y);
    fixture.insert("positions", cpu(positions));
    fixture.insert("logits", cpu(logits));
    fixture.insert("loss", cpu(loss));
    for (const auto& p : model->named_parameters()) fixture.insert("grad." + p.key(), cpu(p.value().grad()));
    model->to(torch::kCPU);  // the weights as the twin loads them
    save_weights(paths.weights(), model);
    write_file_atomic(o->out + "/fixture.pt", torch::pickle_save(fixture));
    std::cout << "fixture written: " << o->out << " (" << o->device << ", vocab " << c.model.vocab_size << ", loss "
              << loss.item<double>() << ")\n";
  });
}

}  // namespace poslab::cli
