"""Each reader on the shapes public deployments write (sources named per test), and every bad input with
its one clear message."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.unit.workbench.deploy.conftest import DEPLOY
from workbench.deploy.api import ImportRequest, lint_reader, run_import
from workbench.deploy.convention import load_mapping
from workbench.deploy.read import read_paths
from workbench.errors import WorkbenchError


def _settings(container) -> dict[str, tuple[str | None, int]]:
    return {s.key: (s.value, s.origin.line) for s in container.settings()}


def test_docker_run_with_the_images_entrypoint(tmp_path):
    # vLLM's docs/deployment/docker.md: the image's entrypoint is `vllm serve`, the arguments follow the image
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/bin/bash\nexport MODEL=mistralai/Mistral-7B-v0.1\n"
        "docker run --runtime nvidia --gpus all \\\n    -v ~/.cache/huggingface:/root/.cache/huggingface \\\n"
        '    --env "HUGGING_FACE_HUB_TOKEN=<secret>" -e CUDA_VISIBLE_DEVICES=0,1 \\\n    -p 8000:8000 --ipc=host \\\n'
        "    vllm/vllm-openai:v0.10.2 \\\n    --model $MODEL --tensor-parallel-size 2\n"
    )
    [container] = read_paths((script,), {}).containers
    found = _settings(container)
    assert container.launcher == "image entrypoint (vllm serve)"
    assert found["image"] == ("vllm/vllm-openai:v0.10.2", 7)
    assert found["flag.--model"] == ("mistralai/Mistral-7B-v0.1", 8)
    assert found["env.CUDA_VISIBLE_DEVICES"] == ("0,1", 5)
    assert found["docker.gpus"] == ("all", 3) and found["docker.runtime"] == ("nvidia", 3)
    model = next(s for s in container.flags if s.key == "flag.--model")
    assert [o.line for o in model.resolved_from] == [2]  # $MODEL resolved from its export


def test_ported_docker_run_gets_npu_devices_and_renamed_env(tmp_path):
    script = tmp_path / "svc" / "run.sh"
    script.parent.mkdir()
    script.write_text(
        "docker run --runtime nvidia --gpus 2 -e CUDA_VISIBLE_DEVICES=0,1 --shm-size 64m \\\n"
        "  vllm/vllm-openai:v0.11.0 --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192\n"
    )
    result = run_import(ImportRequest((script.parent,), to_ascend=tmp_path / "out"))
    ported = (tmp_path / "out" / "run.sh").read_text()
    assert "quay.io/ascend/vllm-ascend:v0.11.0 vllm serve --model" in ported
    assert "--device /dev/davinci0 --device /dev/davinci1 --device /dev/davinci_manager" in ported
    assert "ASCEND_RT_VISIBLE_DEVICES=0,1" in ported and "--runtime" not in ported and "--shm-size 1g" in ported
    assert result.pick.release == "v0.11.0" and result.clean()


def test_dockerfile_entrypoint_with_variables(tmp_path):
    # koyeb/example-vllm Dockerfile: a shell-form ENTRYPOINT with ${VAR:-default} and ${VAR:+...}
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM vllm/vllm-openai:latest\n\nENTRYPOINT python3 -m vllm.entrypoints.openai.api_server \\\n"
        '    --model ${MODEL_NAME:-meta-llama/Meta-Llama-3.1-8B-Instruct} \\\n    ${REVISION:+--revision "$REVISION"}\n'
    )
    [container] = read_paths((tmp_path,), {}).containers
    assert container.launcher == "api_server"
    assert _settings(container)["flag.--model"][0] == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert "flag.--revision" not in _settings(container)  # ${REVISION:+...} with REVISION unset is nothing


def test_inherited_entrypoint_gets_named_in_the_port(tmp_path):
    (tmp_path / "Dockerfile").write_text(
        'ARG VLLM=v0.13.0\nFROM vllm/vllm-openai:${VLLM}\nCMD ["--model", "Qwen/Qwen3-8B"]\n'
    )
    result = run_import(ImportRequest((tmp_path,), to_ascend=tmp_path.parent / "ported"))
    text = (tmp_path.parent / "ported" / "Dockerfile").read_text()
    assert text.splitlines()[:3] == [
        "ARG VLLM=v0.13.0",
        "FROM quay.io/ascend/vllm-ascend:${VLLM}",
        'ENTRYPOINT ["vllm", "serve"]',
    ]
    assert result.pick.release == "v0.13.0" and result.clean()


def test_llm_call_in_python(tmp_path):
    # vLLM's examples/offline_inference: LLM(model=..., keyword engine arguments)
    (tmp_path / "offline.py").write_text(
        "from vllm import LLM\nllm = LLM(\n    model='facebook/opt-125m',\n    max_model_len=2048,\n    enforce_eager=True,\n)\n"
    )
    [container] = read_paths((tmp_path,), {}).containers
    assert container.launcher == "LLM()"
    assert _settings(container) == {"model": ("facebook/opt-125m", 3), "flag.--max-model-len": ("2048", 4),
                                    "flag.--enforce-eager": ("true", 5)}  # fmt: skip


def test_convention_from_a_mapping_file(tmp_path):
    (tmp_path / "conv.yaml").write_text(
        "flags: {MAX_LEN: --max-model-len, MODEL_ID: --model}\nnegatable: [--enable-prefix-caching]\n"
    )
    convention = load_mapping(tmp_path / "conv.yaml")
    assert convention.flags == {"MAX_LEN": "--max-model-len", "MODEL_ID": "--model"}
    with pytest.raises(WorkbenchError, match="'flags' maps environment names to flags"):
        (tmp_path / "bad.yaml").write_text("flags: {MAX_LEN: 4096}\n")
        load_mapping(tmp_path / "bad.yaml")


def test_the_workers_convention_is_detected():
    convention = read_paths((DEPLOY / "worker-vllm",), {}).convention
    assert convention.flags["MAX_MODEL_LEN"] == "--max-model-len"
    assert convention.flags["MODEL_NAME"] == "--model"  # an alias
    assert "HOST" not in convention.flags  # reserved by the worker
    assert "--enable-prefix-caching" in convention.negatable and "--swap-space" in convention.removed


def test_a_chart_without_helm_is_named_with_the_command_to_render_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = read_paths((DEPLOY / "production-stack" / "helm",), {})
    [chart] = [n for n in result.not_read if n.path.endswith("helm")]
    assert "helm is not installed here" in chart.reason and "helm template RELEASE" in chart.reason
    assert result.containers == ()


def test_a_chart_with_helm_is_rendered(tmp_path, monkeypatch):
    # a stand-in `helm` on PATH that prints the chart's real rendering (made by Helm's own SDK, see SOURCE)
    helm = tmp_path / "helm"
    helm.write_text(f"#!/bin/sh\ncat {DEPLOY / 'production-stack' / 'rendered.yaml'}\n")
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = read_paths(
        (DEPLOY / "production-stack" / "helm",), {}, (DEPLOY / "production-stack" / "values-05-cpu-offloading.yaml",)
    )
    assert [c.name for c in result.containers] == ["Deployment/vllm-mistral-deployment-vllm/vllm"]
    assert result.containers[0].notes == ("rendered from vllm-stack/templates/deployment-vllm-multi.yaml",)


def test_env_interpolation_from_the_request(tmp_path):
    (tmp_path / "compose.yaml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.11.0\n    command: --model ${MODEL}\n"
    )
    result = run_import(ImportRequest((tmp_path,), env=("MODEL=Qwen/Qwen3-8B",)))
    assert result.read.containers[0].model() == "Qwen/Qwen3-8B" and result.notes == ()


def test_lint_reads_a_multi_document_manifest_through_the_hook():
    from workbench.lint.api import lint_source

    report = lint_source(DEPLOY / "lws-vllm" / "lws.yaml", release="v0.9.1", readers=(lint_reader,))
    assert report.parsed.settings() >= {"flag.--tensor-parallel-size", "flag.--pipeline-parallel-size"}
    assert report.errors == []


def test_bad_inputs_get_one_clear_message(tmp_path):
    with pytest.raises(WorkbenchError, match="no such file or directory"):
        ImportRequest((tmp_path / "missing",))
    with pytest.raises(WorkbenchError, match="0.27.1 reads as a vLLM version"):
        ImportRequest((DEPLOY / "lws-vllm",), release="0.27.1")
    with pytest.raises(WorkbenchError, match="--env 'MODEL'"):
        ImportRequest((DEPLOY / "lws-vllm",), env=("MODEL",))
    with pytest.raises(WorkbenchError, match="inside the input"):
        ImportRequest((DEPLOY / "lws-vllm",), to_ascend=DEPLOY / "lws-vllm" / "out")
    bad = tmp_path / "k8s.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nspec: [unclosed\n")
    with pytest.raises(WorkbenchError, match=r"k8s.yaml:\d+: not valid YAML"):
        read_paths((bad,), {})


def test_the_verb_is_import():
    from workbench.cli import _verb_modules, main

    assert _verb_modules()["import"] == "import_"
    assert main(["import", str(DEPLOY / "lws-vllm"), "--no-diff"]) == 0


def test_result_document_is_stamped(tmp_path):
    from workbench.deploy.api import IMPORT_KIND

    result = run_import(ImportRequest((DEPLOY / "lws-vllm",)))
    data = IMPORT_KIND.read(result.write(tmp_path / "import.json"))
    assert data["pick"]["release"] == "v0.11.0" and data["containers"][0]["name"] == "LeaderWorkerSet/vllm/vllm-leader"


def test_shipped_recipes_are_not_taken_for_config_files():
    assert (
        lint_reader(
            Path("recipes/serving/ascend-7b-chat.yaml").resolve(),
            Path("recipes/serving/ascend-7b-chat.yaml").read_text(),
        )
        is None
    )


def test_a_script_that_turns_variables_into_flags(tmp_path):
    # the shape of serverless start scripts: flags collected in ARGS from variables, then `vllm serve $MODEL $ARGS`
    script = tmp_path / "start.sh"
    script.write_text(
        '#!/bin/bash\nMODEL=${MODEL_NAME:-Qwen/Qwen3-8B}\nARGS=""\n'
        'if [ -n "$MAX_MODEL_LEN" ]; then ARGS="$ARGS --max-model-len $MAX_MODEL_LEN"; fi\n'
        "exec vllm serve $MODEL $ARGS --port 8000\n"
    )
    env = {"MAX_MODEL_LEN": "8192"}
    result = run_import(ImportRequest((tmp_path,), env=tuple(f"{k}={v}" for k, v in env.items())))
    found = _settings(result.read.containers[0])
    assert found["model"] == ("Qwen/Qwen3-8B", 5)
    assert found["flag.--max-model-len"] == ("8192", 4)  # the line that writes the flag
    assert any("models judged: Qwen/Qwen3-8B" in r.text for r in result.pick.reasons)


def test_statefulset_and_job_with_envfrom_and_dependent_variables(tmp_path):
    # Kubernetes expands $(VAR) from the container's own env; envFrom reads a ConfigMap of the same input
    (tmp_path / "k8s.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: engine}\ndata:\n  MAX_LEN: '4096'\n---\n"
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: llm}\nspec:\n  template:\n    spec:\n"
        "      runtimeClassName: nvidia\n      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.11.0\n"
        "        envFrom: [{configMapRef: {name: engine}}]\n"
        "        args: [--model, Qwen/Qwen2.5-7B-Instruct, --max-model-len, $(MAX_LEN)]\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: warm}\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: bench\n        image: python:3.12\n        command: [python, -c, print(1)]\n"
    )
    result = read_paths((tmp_path / "k8s.yaml",), {})
    [container] = result.containers
    found = _settings(container)
    assert container.name == "StatefulSet/llm/vllm" and container.launcher == "image entrypoint (vllm serve)"
    assert found["flag.--max-model-len"] == ("4096", 18) and found["pod.runtimeClassName"] == ("nvidia", 13)
    assert found["env.MAX_LEN"] == ("4096", 5)  # from the ConfigMap, with its line
