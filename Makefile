# jobrelay developer entry points. `make demo` and `make test` work on a fresh
# machine: they install what is missing first (pip deps, etcd, Kubernetes builds).
PYTHON ?= python3
PYTEST_ARGS ?=

.PHONY: deps lock build demo test test-chaos test-unit lint bench fleet-down image version

# The versions CI tested (requirements/dev.lock, hashed), then jobrelay itself on top.
deps:
	@$(PYTHON) -c "import jobrelay, pytest, xdist, hypothesis, mypy, build, pipx, selenium" 2>/dev/null || \
	  { $(PYTHON) -m pip install -q --require-hashes --no-deps -r requirements/dev.lock && $(PYTHON) -m pip install -q --no-deps -e .; }
	@(command -v etcd && command -v bwrap && command -v chromium && command -v chromedriver) >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server bubblewrap chromium chromium-driver)

# Pin every package (and its hashes) after a change of pyproject.toml's dependencies;
# the image installs requirements/runtime.lock (and builds jobrelay's wheel with the backend of
# requirements/build.lock), CI requirements/dev.lock.
LOCK = uv pip compile pyproject.toml --python-version 3.11 --universal --generate-hashes -q
BUILD_REQUIRES = $(PYTHON) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires']))"
lock:
	$(LOCK) -o requirements/runtime.lock
	$(LOCK) --extra dev -o requirements/dev.lock
	$(BUILD_REQUIRES) | uv pip compile - --python-version 3.11 --universal --generate-hashes -q -o requirements/build.lock

# The release's one version (src/jobrelay/__init__.py; the charts follow it) and the image.
VERSION ?= $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' src/jobrelay/__init__.py)
IMAGE ?= jobrelay:$(VERSION)
# docker, podman or buildah, the first found (or CONTAINER_TOOL=...).
CONTAINER_TOOL ?= $(shell for tool in docker podman buildah; do command -v $$tool >/dev/null 2>&1 && { echo $$tool; break; }; done)

# Set the one version everywhere (the package, both charts' version and appVersion):
# make version VERSION=0.4.0. docs/release.md.
version:
	$(PYTHON) scripts/set_version.py $(VERSION)

# The controller image from this checkout: the Dockerfile installs requirements/runtime.lock
# (hash-checked) and jobrelay's wheel on the base image it pins (pulled from Docker Hub).
# make image [IMAGE=registry.example.com/jobrelay:X.Y.Z]; docs/release.md.
image:
	@test -n "$(CONTAINER_TOOL)" || { echo "make image: no container tool found: install docker, podman or buildah, or set CONTAINER_TOOL (docs/release.md)" >&2; exit 1; }
	$(CONTAINER_TOOL) build -t $(IMAGE) --build-arg VERSION=$(VERSION) \
	  --build-arg REVISION=$$(git rev-parse HEAD 2>/dev/null || echo unknown) -f Dockerfile .

build: deps
	$(PYTHON) -m jobrelay fleet build

lint: deps
	ruff check src tests bench
	ruff format --check src tests bench
	mypy
	lint-imports

# Two test processes (pytest-xdist, a whole file at a time each) where the kernel allows
# them: the e2e tests mostly wait on real clusters, so two keep both cores busy
# (1,288-1,822 s against 2,927 s for the integration and e2e tests in CI, 2026-12-01;
# docs/development.md).
# Each process runs fleets of its own, on ports of its own (tests/conftest.py). Two fleets
# and the 60-pod log follows of tests/e2e/test_log_streams_bounded.py (an inotify instance
# each in KWOK) need more inotify instances than the kernel's default 128 per user, so one
# process runs unless fs.inotify.max_user_instances is 512 or more (sysctl, as root;
# .ci/run raises it). TEST_WORKERS=0 runs one process, TEST_WORKERS=2 two.
TEST_WORKERS ?= $(shell [ "$$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo 0)" -ge 512 ] && echo 2 || echo 0)
test: build
	$(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS); code=$$?; [ $$code -eq 5 ] && echo "no tests selected" && code=0; exit $$code

# The chaos test of tests/chaos/ (left out of `make test`): a fleet of its own under
# faults for a few minutes; it prints its figures at the end of pytest's report.
test-chaos: build
	$(PYTHON) -m pytest tests/chaos -m chaos $(PYTEST_ARGS)

# Unit tests alone, on every core (pytest-xdist), and the line coverage they give on their
# own: the controller package >= 90 %, the fleet package >= 85 %, admission >= 95 % (a lower
# figure fails the target). The example tests run traced and meet the gates alone; the
# property tests (hypothesis marks each `hypothesis`) run after them untraced, as they run
# the same lines thousands of times: traced, the whole took 353 s on CI's 2 cores, split
# 207 s.
UNIT_WORKERS ?= auto
test-unit: deps
	$(PYTHON) -m pytest tests/unit -n $(UNIT_WORKERS) -m "not hypothesis" --cov=jobrelay.controller --cov=jobrelay.fleet --cov=jobrelay.admission --cov-report= $(PYTEST_ARGS)
	$(PYTHON) -m pytest tests/unit -n $(UNIT_WORKERS) -m hypothesis $(PYTEST_ARGS); code=$$?; [ $$code -eq 5 ] && echo "no property tests selected" && code=0; exit $$code
	$(PYTHON) -m coverage report --include='*/jobrelay/controller/*' --fail-under=90
	$(PYTHON) -m coverage report --include='*/jobrelay/fleet/*' --fail-under=85
	$(PYTHON) -m coverage report --include='*/jobrelay/admission/*' --fail-under=95

# Only what the demo's fleet runs; the tests' helm builds, CRDs and promtool come with
# the first `make test` (its `build`).
demo: deps
	$(PYTHON) -m jobrelay fleet build --fleet-only
	$(PYTHON) -m jobrelay demo

bench: build
	$(PYTHON) -m bench

fleet-down:
	$(PYTHON) -m jobrelay fleet down
