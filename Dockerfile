# neuron-compat: one image for every compose service (migrate, api, worker, beat); the command picks the role.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    COMPAT_VAR_DIR=/app/var

WORKDIR /app

# g++ builds the device's C++ core (neuron_backend/csrc/, through torch.utils.cpp_extension and ninja from PyPI);
# the image builds it once below, so no container compiles or downloads anything when it starts.
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*

# The CPU torch wheel, from PyTorch's CPU index, in its own layer: the default index would pull a multi-GB CUDA
# build. The version is the project's pin; `2.13.0+cpu` satisfies `torch==2.13.0` in the install below.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

# Dependencies before sources, so editing code does not re-download them. Exact pins come from pyproject.toml.
COPY pyproject.toml README.md ./
RUN python -c "import subprocess, sys, tomllib; \
deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; \
subprocess.check_call([sys.executable, '-m', 'pip', 'install', *deps])"

COPY compat ./compat
COPY neuron_backend ./neuron_backend
COPY worker ./worker
COPY service ./service
COPY dashboards ./dashboards
COPY cli ./cli
# Editable: data directories without __init__.py (templates, static, device profiles) are used in place.
RUN pip install --no-deps -e . && TORCH_DEVICE_BACKEND_AUTOLOAD=0 python -c "from neuron_backend import core; print(core.ensure_built())" \
    && python -c "import compat, worker.orchestration.celery_app, service.app, cli.app, neuron_backend"

# The newest-Transformers lane's image (compose service worker-latest, build arg TRANSFORMERS_LATEST=1): the newest
# transformers release from the package index over the pin, nothing else changed. Pinned images skip this.
ARG TRANSFORMERS_LATEST=0
RUN if [ "$TRANSFORMERS_LATEST" = "1" ]; then pip install --upgrade transformers \
      && python -c "import transformers, cli.app; print('transformers', transformers.__version__)"; fi

# Never run the harness as root: it loads model configs from the Hub and runs generated models.
RUN useradd --create-home --uid 10001 compat && mkdir -p /app/var && chown compat:compat /app/var
USER compat
VOLUME ["/app/var"]
EXPOSE 8000

CMD ["compat", "--help"]
