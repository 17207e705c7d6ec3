# poslab on Debian 12, CPU: builds the project and runs the test suite.
#   docker build -t poslab .                 # builds and tests
#   docker run --rm poslab compare --config configs/experiments/quick.json --out runs/quick
#
# CUDA variant: build against a CUDA LibTorch instead of Debian's CPU one, e.g.
#   docker build --build-arg BASE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-devel --target cuda -t poslab:cuda .
# The cuda stage installs the non-Torch dependencies and points CMake at the wheel's LibTorch
# (python -c "import torch; print(torch.utils.cmake_prefix_path)"); see scripts/gpu/ and the README.
ARG BASE=debian:12
FROM debian:12 AS cpu
WORKDIR /poslab
COPY . .
RUN bash scripts/setup.sh && ctest --test-dir build --output-on-failure -j 2
ENTRYPOINT ["/poslab/build/poslab"]

FROM ${BASE} AS cuda
WORKDIR /poslab
COPY . .
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build nlohmann-json3-dev libspdlog-dev libgtest-dev libcli11-dev \
      libsentencepiece-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$(python -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    && cmake --build build
ENTRYPOINT ["/poslab/build/poslab"]
