# The README's two commands are `make run` and `make test`; both set up .venv first (idempotent).
.PHONY: setup run test test-fast test-long bench lint format clean

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/ascend-workbench run

test: setup
	bash scripts/test.sh

# Unit tests only: no servers, notebooks, browser or downloads (`slow` excluded); under three minutes.
test-fast: setup
	bash scripts/test.sh -n 2 -m "not slow and not integration and not notebooks and not browser" tests/unit

# Long experiments kept as tests (compiled-mode engines): minutes each, not part of `make test`.
test-long: setup
	bash scripts/test.sh -m long tests

bench: setup
	bash scripts/bench.sh

lint: setup
	.venv/bin/ruff check ascend_backend workbench tests benchmarks
	.venv/bin/ruff format --check ascend_backend workbench tests benchmarks

format: setup
	.venv/bin/ruff format ascend_backend workbench tests benchmarks

clean:
	rm -rf runs .pytest_cache
