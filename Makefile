# The README's two commands are `make run` and `make test`; both set up .venv first (idempotent).
.PHONY: setup run test bench lint clean

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/ascend-workbench run

test: setup
	bash scripts/test.sh

bench: setup
	bash scripts/bench.sh

lint: setup
	.venv/bin/ruff check ascend_backend workbench tests benchmarks

clean:
	rm -rf runs .pytest_cache
