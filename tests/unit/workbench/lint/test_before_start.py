"""serve, bench, sweep and bisect lint the recipe first: an error stops them before any server starts."""

from __future__ import annotations

import pytest
import yaml

from workbench.cli import main

RECIPE = {
    "name": "bad-cpu",
    "device": "cpu",
    "model": "embedded:tiny",
    "engine": {"block_size": 32, "additional_config": {"enable_cpu_binding": "false"}},
    "env": {"VLLM_ASCEND_ENABLE_MLAPO": "true", "VLLM_CPU_KVCACHE_SPACE": "1"},
}


@pytest.fixture
def no_server(monkeypatch):
    """Any attempt to start a server fails the test (the lint must stop first)."""
    import workbench.serving.server as server

    def refuse(*args, **kwargs):
        raise AssertionError("a server was started although the recipe does not lint")

    monkeypatch.setattr(server, "start", refuse)
    monkeypatch.setattr(server, "lease", refuse)


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--recipe", "{recipe}"],
        [
            "bench",
            "--recipe",
            "{recipe}",
            "--input-len",
            "8",
            "--output-len",
            "4",
            "--num-prompts",
            "1",
            "--concurrency",
            "1",
        ],
        ["bisect", "--recipe", "{recipe}", "--out", "{tmp}/bisect"],
    ],
)
def test_a_recipe_that_does_not_lint_starts_nothing(tmp_path, capsys, no_server, argv):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(RECIPE))
    code = main([a.format(recipe=path, tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert "env.VLLM_ASCEND_ENABLE_MLAPO (rejected" in err and "--no-lint" in err


def test_a_sweep_lints_every_point_before_the_first_server(tmp_path, capsys, no_server):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(yaml.safe_dump(RECIPE))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "s",
                "base": str(recipe),
                "grid": {"max_num_seqs": [4, 8]},
                "workload": {"input_len": 8, "output_len": 4, "num_prompts": 2, "concurrency": [1]},
            }
        )
    )
    assert main(["sweep", "--spec", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "recipe bad-cpu" in err and "env.VLLM_ASCEND_ENABLE_MLAPO (rejected" in err
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_the_shipped_recipes_lint_clean():
    from workbench.lint.api import lint_recipe
    from workbench.recipes import load_serving_recipe
    from workbench.settings import recipes_dir

    for path in sorted((recipes_dir() / "serving").glob("*.yaml")):
        report = lint_recipe(load_serving_recipe(str(path)))
        assert report.errors == [], (path.name, [f.reason for f in report.errors])
