# poslab on Debian 12, CPU: builds the project and runs the test suite. scripts/docker/build.sh makes the
# debian:12 base from Debian's archive (no image registry needed), builds, and runs the image:
#   docker build --target cpu -t poslab .    # builds and tests
#   docker run --rm poslab compare --config configs/experiments/quick.json --out runs/quick
#
ARG CUDA_BASE=debian:12
FROM debian:12 AS cpu
WORKDIR /poslab
COPY . .
RUN bash scripts/setup.sh && ctest --test-dir build --output-on-failure -j 2
ENTRYPOINT ["/poslab/build/poslab"]

# CUDA variant, built as CI's CUDA leg builds (scripts/libtorch2/pypi_cuda.sh): every target against the
# LibTorch inside PyPI's CUDA torch wheel, then the suite on the CPU. LibTorch's CMake config needs the CUDA
# toolkit's nvcc: CUDA_BASE must be a Debian-family image with the toolkit in /usr/local/cuda (NVIDIA's
# "devel" images), or the image `scripts/docker/build.sh --cuda` makes from debian:12 and the host's toolkit.
# The default, debian:12, has none: the stage then stops with pypi_cuda.sh's one-line error.
#   docker build --build-arg CUDA_BASE=<an image with /usr/local/cuda> --target cuda -t poslab:cuda .
FROM ${CUDA_BASE} AS cuda
WORKDIR /poslab
COPY . .
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build nlohmann-json3-dev libspdlog-dev libgtest-dev libcli11-dev \
      python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/local/cuda/bin:${PATH}
# A CA bundle for pip behind a TLS-intercepting proxy (scripts/docker/build.sh passes the one pip trusts here).
ARG PIP_CERT=
RUN if [ -n "$PIP_CERT" ]; then export PIP_CERT; else unset PIP_CERT; fi; \
    POSLAB_TORCH_VENV=/opt/torch-venv POSLAB_PYPI_BUILD=build bash scripts/libtorch2/pypi_cuda.sh \
    && rm -rf /poslab/.docker-ca
ENTRYPOINT ["/poslab/build/poslab"]
