// Additive family: encodings added to the token embedding before the first block.
#pragma once
#include <mutex>

#include "model/positional/positional.h"

namespace poslab {

class NoEncodingImpl : public PositionalEncodingImpl {
 public:
  NoEncodingImpl() : PositionalEncodingImpl("none") {}
  std::string family() const override { return "none"; }
};

class IndexEncodingImpl : public PositionalEncodingImpl {
 public:
  explicit IndexEncodingImpl(double scale) : PositionalEncodingImpl("index"), scale_(scale) {}
  std::string family() const override { return "additive"; }
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) override;

 private:
  double scale_;
};

// A fixed table computed from a formula (sinusoidal, binary), times `scale`, cached on the input's device.
class TableEncodingImpl : public PositionalEncodingImpl {
 public:
  TableEncodingImpl(std::string kind, double scale) : PositionalEncodingImpl(std::move(kind)), scale_(scale) {}
  std::string family() const override { return "additive"; }
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) override;

 protected:
  // (n, C): the rows of these positions (n,); make_table(rows) is positions 0..rows-1.
  virtual torch::Tensor make_rows(const torch::Tensor& positions) const = 0;
  torch::Tensor make_table(int64_t rows) const { return make_rows(torch::arange(rows, torch::kLong)); }  // (rows, C)

 private:
  double scale_;
  std::mutex cache_mutex_;  // batch shards run the forward pass on several threads at once
  torch::Tensor cache_;     // (rows, C), already scaled
};

class SinusoidalEncodingImpl : public TableEncodingImpl {
 public:
  SinusoidalEncodingImpl(int64_t n_embd, double base, double scale)
      : TableEncodingImpl("sinusoidal", scale), n_embd_(n_embd), base_(base) {}

 protected:
  torch::Tensor make_rows(const torch::Tensor& positions) const override { return sinusoidal_rows(positions, n_embd_, base_); }

 private:
  int64_t n_embd_;
  double base_;
};

// Positions past 2^bits repeat the low bits' pattern: unbounded, like every kind but learned.
class BinaryEncodingImpl : public TableEncodingImpl {
 public:
  BinaryEncodingImpl(int64_t n_embd, int bits, bool signed_bits, double scale)
      : TableEncodingImpl("binary", scale), n_embd_(n_embd), bits_(bits), signed_(signed_bits) {}

 protected:
  torch::Tensor make_rows(const torch::Tensor& positions) const override {
    return binary_rows(positions, n_embd_, bits_, signed_);
  }

 private:
  int64_t n_embd_;
  int bits_;
  bool signed_;
};

class LearnedEncodingImpl : public PositionalEncodingImpl {
 public:
  LearnedEncodingImpl(int64_t block_size, int64_t n_embd);
  std::string family() const override { return "additive"; }
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) override;
  int64_t max_positions() const override { return weight.size(0); }
  torch::Tensor weight;  // (block_size, C)
};

}  // namespace poslab
