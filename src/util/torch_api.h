// The parts of LibTorch's C++ API that poslab uses, in place of <torch/torch.h>, and its precompiled header.
// torch/torch.h brings the whole API (data loaders, the JIT, every nn module and its functional form): 30-60%
// more to parse for the precompiled header, which a fresh build makes first, alone on its critical path.
#pragma once
#include <torch/autograd.h>
#include <torch/cuda.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>
