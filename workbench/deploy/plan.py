"""What the Ascend counterpart of each engine container changes, and why (docs/METHOD.md §1, §2, §4).

One `Change` per setting that moves: the image (the vllm-ascend image of the picked release), the launcher
path, environment renames and removals (`policy/deploy/ascend-port.yaml`), device resources and runtime
classes of the orchestration layer, `docker run` GPU options and /dev/shm, and every setting lint refuses
or finds dead at the picked release (lint's own fix). Each change carries the text edits that make it in
the file the setting was read from, and its citations: the METHOD section and the vllm-ascend line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from workbench.deploy.lintview import parsed_for
from workbench.deploy.model import Container, Setting, SourceKind
from workbench.deploy.policy import PortPolicy, repository_of, tag_of

M_BACKEND, M_VERSIONS, M_SHM = "docs/METHOD.md §1", "docs/METHOD.md §2", "docs/METHOD.md §4"


@dataclass(frozen=True)
class Edit:
    file: str
    line: int
    action: str  # replace | delete | delete_block | insert_after
    old: str = ""
    new: str = ""


@dataclass(frozen=True)
class Change:
    container: str
    setting: str
    before: str
    after: str | None  # None: removed
    why: str
    cite: str
    method: str
    where: str  # file:line it was read from
    edits: tuple[Edit, ...] = ()

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "edits"}


def plan(
    container: Container,
    release: str,
    policy: PortPolicy,
    consumed: frozenset[str] = frozenset(),
    npu_resource: str | None = None,
) -> list[Change]:
    changes = _image(container, release, policy)
    changes += _entrypoint(container, policy)
    changes += _launcher(container, policy)
    changes += [c for s in container.env if (c := _env(container, s, policy)) is not None]
    changes += _resources(container, policy, npu_resource)
    changes += _placement(container, policy)
    changes += _compose_npus(container, policy)
    renamed = {c.setting for c in changes}
    if container.launcher:  # a companion (a Ray worker of the same pod group) runs no server to lint
        changes += _lint_fixes(container, release, consumed, renamed)
    return changes


def _change(
    container: Container, setting: Setting, after: str | None, why: str, cite: str, method: str, edits
) -> Change:
    return Change(
        container.name, setting.key, setting.value or "", after, why, cite, method, str(setting.origin), tuple(edits)
    )


def _image(container: Container, release: str, policy: PortPolicy) -> list[Change]:
    image = container.image
    if image is None or image.value is None:
        return []
    new = policy.ascend_image.template.format(release=release)
    entry = " ".join(policy.ascend_image.entrypoint)
    shown = (
        f"{new} {entry}"
        if container.kind is SourceKind.SHELL and container.launcher.startswith("image entrypoint")
        else new
    )
    edits = [Edit(image.origin.file, image.origin.line, "replace", image.value, shown)]
    if image.resolved_from:  # FROM repo:${ARG}: the repository on the FROM line, the tag where the ARG is set
        tag = tag_of(image.value) or ""
        edits = [
            Edit(image.origin.file, image.origin.line, "replace", repository_of(image.value), new.rsplit(":", 1)[0])
        ]
        edits += [Edit(o.file, o.line, "replace", tag, release) for o in image.resolved_from if tag]
    why = f"the vllm-ascend image of {release} (CANN, torch_npu, vLLM and vllm-ascend of one verified row)"
    return [_change(container, image, new, why, policy.ascend_image.cite[0], M_VERSIONS, edits)]


def _entrypoint(container: Container, policy: PortPolicy) -> list[Change]:
    """A GPU image whose own entrypoint was `vllm serve`: the Ascend image has none, so the command says it."""
    image = container.image
    if image is None or not container.launcher.startswith("image entrypoint"):
        return []
    words = json.dumps(list(policy.ascend_image.entrypoint))
    file, line = image.origin.file, image.origin.line
    if container.kind in (SourceKind.KUBERNETES, SourceKind.HELM_RENDERED):
        edit = Edit(file, line, "insert_sibling", "", f"command: {words}")
    elif container.kind is SourceKind.COMPOSE:
        edit = Edit(file, line, "insert_sibling", "", f"entrypoint: {words}")
    elif container.kind is SourceKind.DOCKERFILE:
        edit = Edit(file, line, "insert_after", "", f"ENTRYPOINT {words}")
    else:
        return []  # `docker run IMAGE ARGS`: the image change writes `IMAGE vllm serve ARGS`
    why = 'the vllm-ascend image sets no ENTRYPOINT (it ends with CMD ["/bin/bash"]), so the command names `vllm serve`'
    setting = Setting("entrypoint", " ".join(policy.ascend_image.entrypoint), image.origin)
    return [
        _change(
            container,
            setting,
            " ".join(policy.ascend_image.entrypoint),
            why,
            policy.ascend_image.cite[1],
            M_VERSIONS,
            [edit],
        )
    ]


def _launcher(container: Container, policy: PortPolicy) -> list[Change]:
    """An absolute `.../bin/vllm` (a GPU image's virtualenv) becomes `vllm`; an image entrypoint is named."""
    found: list[Change] = []
    for setting in container.placement:
        if setting.key == "launcher" and setting.value and setting.value != "vllm":
            edit = Edit(setting.origin.file, setting.origin.line, "replace", setting.value, policy.launcher.to)
            found.append(
                _change(
                    container,
                    setting,
                    policy.launcher.to,
                    policy.launcher.why,
                    policy.launcher.cite,
                    M_VERSIONS,
                    [edit],
                )
            )
    return found


def _env(container: Container, setting: Setting, policy: PortPolicy) -> Change | None:
    row = policy.env.get(setting.name)
    if row is None:
        return None
    line = setting.origin.line
    if row.removes:
        return _change(container, setting, None, row.why, row.cite, M_BACKEND, [_delete(container, setting)])
    edit = Edit(setting.origin.file, line, "replace", setting.name, row.to)
    return _change(container, setting, row.to, row.why, row.cite, M_BACKEND, [edit])


def _delete(container: Container, setting: Setting) -> Edit:
    block = setting.kind == "env" and setting.origin.via == "env"  # a manifest's `- name: X` item
    if setting.origin.via == "template" and setting.origin.file.endswith(".json"):
        return Edit(setting.origin.file, setting.origin.line, "delete_json_entry", setting.name, "")
    value = setting.value or "" if setting.kind == "flag" else ""
    return Edit(
        setting.origin.file, setting.origin.line, "delete_block" if block else "delete_setting", setting.name, value
    )


def _resources(container: Container, policy: PortPolicy, npu_resource: str | None) -> list[Change]:
    found: list[Change] = []
    for setting in container.resources:
        name = setting.key.split(".", 2)[-1]
        row = policy.resource(name)
        if row is None:
            continue
        if row.removes:
            edit = Edit(setting.origin.file, setting.origin.line, "delete")
            found.append(_change(container, setting, None, row.why, row.cite, M_BACKEND, [edit]))
            continue
        target = npu_resource or row.to
        count = "1" if "/mig-" in name else None  # a MIG slice becomes one whole NPU
        edits = [Edit(setting.origin.file, setting.origin.line, "replace", name, target)]
        if count and setting.value:
            edits.append(Edit(setting.origin.file, setting.origin.line, "replace", setting.value, count))
        found.append(
            _change(container, setting, f"{target}: {count or setting.value}", row.why, row.cite, M_BACKEND, edits)
        )
    return found


def _placement(container: Container, policy: PortPolicy) -> list[Change]:
    found: list[Change] = []
    docker = policy.docker
    for setting in container.placement:
        file, line = setting.origin.file, setting.origin.line
        if setting.key == "pod.runtimeClassName" and setting.value in policy.runtime_classes:
            row = policy.runtime_classes[setting.value]
            found.append(_change(container, setting, None, row.why, row.cite, M_BACKEND, [Edit(file, line, "delete")]))
        elif setting.key in ("compose.runtime", "docker.runtime") and setting.value not in (None, "runc"):
            why = f"the {setting.value} container runtime; an Ascend container sees its NPUs as devices"
            edit = (
                Edit(file, line, "delete")
                if setting.key == "compose.runtime"
                else Edit(file, line, "delete_setting", "--runtime", setting.value or "")
            )
            found.append(_change(container, setting, None, why, docker.cite, M_BACKEND, [edit]))
        elif setting.key == "docker.gpus":
            found.append(_devices(container, setting, policy))
        elif setting.key == "compose.gpu_reservation":
            why = "a GPU reservation of the NVIDIA runtime; the NPUs are given as devices"
            found.append(
                _change(container, setting, None, why, docker.cite, M_BACKEND, [Edit(file, line, "delete_deploy")])
            )
        elif setting.key == "compose.device" and setting.value and not setting.value.startswith("/dev/davinci"):
            why = "a GPU device of another vendor; the NPUs are /dev/davinci* with the manager devices"
            found.append(_change(container, setting, None, why, docker.cite, M_BACKEND, [Edit(file, line, "delete")]))
        elif setting.key in ("docker.shm-size", "compose.shm_size") and _bytes(setting.value) < _bytes(
            docker.shm_floor
        ):
            why = f"/dev/shm below {docker.shm_floor}: the server dies under load with a bare bus error"
            edit = Edit(file, line, "replace", setting.value or "", docker.shm_floor)
            found.append(_change(container, setting, docker.shm_floor, why, docker.cite, M_SHM, [edit]))
    return found


def _compose_npus(container: Container, policy: PortPolicy) -> list[Change]:
    if container.kind is not SourceKind.COMPOSE or container.image is None:
        return []
    docker = policy.docker
    reserved = next((s.value for s in container.placement if s.key == "compose.gpu_reservation"), None)
    count = npu_count(reserved, policy) if reserved else _parallel(container)
    devices = [docker.per_npu_device.format(index=i) for i in range(count)] + list(docker.devices)
    image = container.image
    edit = Edit(
        image.origin.file, image.origin.line, "compose_npus", json.dumps(devices), json.dumps(list(docker.mounts))
    )
    how = "the GPU reservation's count" if reserved else "--tensor-parallel-size x --pipeline-parallel-size"
    why = f"{count} NPU(s) ({how}) as /dev/davinci* with the manager devices, and the driver mounts vllm-ascend's container needs"
    setting = Setting("devices", reserved or "", image.origin)
    return [_change(container, setting, ", ".join(devices), why, docker.cite, M_BACKEND, [edit])]


def _parallel(container: Container) -> int:
    size = 1
    for name in ("--tensor-parallel-size", "--pipeline-parallel-size"):
        setting = container.flag(name)
        if setting is not None and (setting.value or "").isdigit():
            size *= int(setting.value or "1")
    return size


def npu_count(value: str | None, policy: PortPolicy) -> int:
    """`--gpus all` / `count: all` -> the node's NPUs; a number -> that many; `device=0,1` / ids -> as many ids."""
    text = (value or "all").split(":")[-1].strip().strip("\"'")
    if text in ("all", "-1", ""):
        return policy.docker.npus_for_all
    if text.isdigit():
        return int(text)
    return len([part for part in re.split(r"[,\s]+", text.replace("device=", "")) if part])


def _devices(container: Container, setting: Setting, policy: PortPolicy) -> Change:
    docker = policy.docker
    count = npu_count(setting.value, policy)
    devices = [docker.per_npu_device.format(index=i) for i in range(count)] + list(docker.devices)
    file, line = setting.origin.file, setting.origin.line
    flags = " ".join([*(f"--device {d}" for d in devices), *(f"-v {m}" for m in docker.mounts)])
    edit = Edit(file, line, "docker_gpus", setting.value or "", flags)
    why = f"{count} NPU(s) as /dev/davinci* plus the manager devices and driver mounts vllm-ascend's container needs"
    return _change(container, setting, ", ".join(devices), why, docker.cite, M_BACKEND, [edit])


def _bytes(text: str | None) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", (text or "0").lower())
    if not match:
        return float("inf")
    return float(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " ")


def _referenced(container: Container, name: str) -> bool:
    if (
        container.kind is SourceKind.COMPOSE
    ):  # compose substitutes ${NAME} from outside; only $$NAME reaches the container
        return any(f"$${name}" in (s.value or "") for s in container.flags)
    return any(f"${name}" in (s.value or "") or f"${{{name}" in (s.value or "") for s in container.flags) or any(
        name in (s.value or "") for s in container.env if s.name != name
    )


def _lint_fixes(container: Container, release: str, consumed: frozenset[str], done: set[str]) -> list[Change]:
    """Settings lint finds refused, dead or renamed at the release: lint's own migration (its `--fix`)."""
    from workbench.lint.api import lint_parsed

    found: list[Change] = []
    by_key = {s.key if s.key != "model" else "flag.--model": s for s in (*container.flags, *container.env)}
    for finding in lint_parsed(parsed_for(container, consumed), release=release).errors:
        setting = by_key.get(finding.setting)
        if setting is None or finding.setting in done or finding.migrate is None:
            continue
        target, value = finding.migrate
        why = f"{finding.finding.value} at {release}: {finding.reason}"
        if target and finding.finding.value == "unknown":
            # lint's did-you-mean is a guess, not a fact: never rename to it. A variable the engine's own
            # command does not use either is read by nothing in the container, so it goes.
            if setting.kind != "env" or _referenced(container, setting.name):
                continue
            why = f"nothing in the engine container reads {setting.name}: neither vLLM nor vllm-ascend {release} does (lint), nor the container's command"
            target = ""
        cite = (
            finding.cite
            or f"workbench/truth/data/vllm_envs.json, vllm_ascend_config.json at {release} (what reads {setting.name})"
        )
        if not target:
            found.append(_change(container, setting, None, why, cite, M_VERSIONS, [_delete(container, setting)]))
        else:
            edit = Edit(setting.origin.file, setting.origin.line, "replace", setting.name, target.split(".", 1)[-1])
            found.append(_change(container, setting, f"{target}={value}", why, cite, M_VERSIONS, [edit]))
    return found
