"""Exact-length prompts on the tiny model's tokenizer, and the CLI flag parsers of smoke/bench/serve."""

from __future__ import annotations

import pytest

from workbench.errors import WorkbenchError
from workbench.serving.load.workload import SLO
from workbench.verbs._common import parse_env_pairs
from workbench.verbs.bench import parse_goodput


@pytest.fixture(scope="module")
def tokenizer():
    from workbench.embedded_models.catalog import prepare
    from workbench.serving.load.workload import load_tokenizer

    return load_tokenizer(prepare("tiny"))


@pytest.mark.parametrize("input_len", [1, 7, 128, 1000])
def test_prompts_have_exact_token_counts(tokenizer, input_len):
    from workbench.serving.load.workload import build_prompts

    prompts = build_prompts(tokenizer, 8, input_len, seed=1)
    assert len({p.text for p in prompts}) == 8
    for prompt in prompts:
        assert prompt.num_tokens == input_len
        assert len(tokenizer.encode(prompt.text, add_special_tokens=True)) == input_len


def test_shared_prefix(tokenizer):
    from workbench.serving.load.workload import build_prompts

    prompts = build_prompts(tokenizer, 4, 100, prefix_ratio=0.5, seed=2)
    ids = [tokenizer.encode(p.text, add_special_tokens=False) for p in prompts]
    shared = 0
    while all(seq[shared] == ids[0][shared] for seq in ids):
        shared += 1
    assert 50 <= shared < 60  # 50 shared tokens; a random suffix may agree on a token or two by chance
    again = build_prompts(tokenizer, 4, 100, prefix_ratio=0.5, seed=2)
    assert [p.text for p in again] == [p.text for p in prompts]  # seeded


def test_goodput_flags():
    assert parse_goodput(["ttft:500", "tpot:50.5"]) == SLO(ttft_ms=500.0, tpot_ms=50.5)
    assert parse_goodput(None) == SLO() and not SLO().active
    with pytest.raises(WorkbenchError, match="KEY one of ttft, tpot, e2el"):
        parse_goodput(["latency:5"])
    with pytest.raises(WorkbenchError, match="not a number"):
        parse_goodput(["ttft:fast"])


def test_env_flags():
    assert parse_env_pairs(["ASCEND_BACKEND_FAULT=rms_norm:scale:factor=1.01", "EMPTY="]) == {
        "ASCEND_BACKEND_FAULT": "rms_norm:scale:factor=1.01",
        "EMPTY": "",
    }
    with pytest.raises(WorkbenchError, match="KEY=VALUE"):
        parse_env_pairs(["NOVALUE"])


def test_cli_requires_exactly_one_server_source(capsys):
    from workbench.cli import main

    with pytest.raises(SystemExit):
        main(["smoke"])
    with pytest.raises(SystemExit):
        main(
            [
                "bench",
                "--url",
                "http://x",
                "--recipe",
                "cpu-tiny",
                "--input-len",
                "1",
                "--output-len",
                "1",
                "--num-prompts",
                "1",
            ]
        )
    assert "not allowed with argument" in capsys.readouterr().err


def test_sigterm_becomes_keyboard_interrupt_so_launched_servers_are_stopped():
    import os
    import signal
    import time

    from workbench.verbs._common import terminate_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with terminate_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here, at once
    assert signal.getsignal(signal.SIGTERM) is before


FIRST_LOAD_IN_TWO_THREADS = """
import sys, threading, time
from workbench.serving.load import workload as loadgen
AUTO = "transformers.models.auto.tokenization_auto"
began = AUTO in sys.modules
if sys.argv[2] == "prefetch":  # as a sweep does: the import starts in the background with the server start
    loadgen.import_tokenizer_library_in_background()
    deadline = time.monotonic() + 60
    while AUTO not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.05)  # nobody but the background thread imports it
imported_before_loading = AUTO in sys.modules
barrier, errors = threading.Barrier(2), []
def load():
    barrier.wait()
    try:
        loadgen.load_tokenizer(sys.argv[1])
    except Exception as error:
        errors.append(repr(error))
threads = [threading.Thread(target=load) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print([began, imported_before_loading, errors])
"""


@pytest.mark.slow
def test_two_threads_loading_the_first_tokenizer_at_once_both_get_it():
    """`sweep --parallel 2` measures its first points at the same moment; without a lock around the first
    `from transformers import AutoTokenizer`, one thread in about three failed here with ImportError
    (transformers' lazy names), so several fresh processes are tried. Two of them first start the
    background import a sweep starts with each server, which the two loads then meet half done."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT
    from workbench.embedded_models.catalog import prepare

    model = str(prepare("tiny"))
    modes = ["plain"] * 3 + ["prefetch"] * 2
    trials = [
        subprocess.Popen(
            [sys.executable, "-c", FIRST_LOAD_IN_TWO_THREADS, model, mode],
            cwd=REPO_ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for mode in modes
    ]
    expected = [f"[False, {mode == 'prefetch'}, []]" for mode in modes]  # no error in any thread
    assert [t.communicate(timeout=300)[0].strip() for t in trials] == expected
